//! Random interleavings of every receive operation and of arrivals from several peers, run
//! through the matcher and the reference model; they must agree on every outcome, queue size
//! and memory charge. Two rules are also checked directly against the queues as they stood
//! before each operation: no message overtakes an older one from the same peer, and no
//! receive is served before an older one that matches.

use proptest::prelude::*;

use super::model::{takes, Ev, Got, Model, Recv};
use crate::matching::*;

type M = Matcher<usize, u64>;

#[derive(Clone, Debug)]
enum Op {
    Post(Kind, Option<u32>, u64, u64, usize),
    PostMulti(Option<u32>, usize, usize),
    Arrive(Kind, u32, u64, usize, Option<u64>, Option<u64>),
    Peek(Kind, Option<u32>, u64, u64),
    PeekClaim(Kind, Option<u32>, u64, u64),
    PeekDiscard(Kind, Option<u32>, u64, u64),
    Claim(Kind, usize, usize, bool),
    Cancel(usize),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Msg), Just(Kind::Tagged)]
}

fn peer() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![3 => (0u32..3).prop_map(Some), 1 => Just(None)]
}

/// Few distinct tags, so that receives and messages meet often; bit 63 is Open MPI's.
fn tag() -> impl Strategy<Value = u64> {
    prop::sample::select(vec![0, 1, 2, 3, 1 << 63, (1 << 63) | 1])
}

fn ignore() -> impl Strategy<Value = u64> {
    prop::sample::select(vec![0, 0, 0, 1, 2, 3, 1 << 63, u64::MAX])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (kind(), peer(), tag(), ignore(), 0usize..48)
            .prop_map(|(k, p, t, i, c)| Op::Post(k, p, t, i, c)),
        1 => (peer(), 0usize..160, 0usize..48).prop_map(|(p, c, m)| Op::PostMulti(p, c, m)),
        5 => (
            kind(),
            0u32..3,
            tag(),
            0usize..48,
            prop::option::of(any::<u64>()),
            prop::option::weighted(0.3, any::<u64>()),
        )
            .prop_map(|(k, p, t, l, d, r)| Op::Arrive(k, p, t, l, d, r)),
        1 => (kind(), peer(), tag(), ignore()).prop_map(|(k, p, t, i)| Op::Peek(k, p, t, i)),
        1 => (kind(), peer(), tag(), ignore()).prop_map(|(k, p, t, i)| Op::PeekClaim(k, p, t, i)),
        1 => (kind(), peer(), tag(), ignore())
            .prop_map(|(k, p, t, i)| Op::PeekDiscard(k, p, t, i)),
        1 => (kind(), any::<usize>(), 0usize..48, any::<bool>())
            .prop_map(|(k, pick, c, d)| Op::Claim(k, pick, c, d)),
        1 => any::<usize>().prop_map(Op::Cancel),
    ]
}

fn spec(r: &Recv) -> RecvSpec {
    RecvSpec::tagged(
        r.peer.map_or(PeerId::ANY, PeerId),
        r.tag,
        r.ignore,
        r.cap,
        Context(r.ctx),
    )
}

fn recv(kind: Kind, peer: Option<u32>, tag: u64, ignore: u64, cap: usize, ctx: usize) -> Recv {
    Recv {
        kind,
        peer,
        tag,
        ignore,
        cap,
        ctx,
        multi: None,
    }
}

fn got(d: &Delivery<usize>, no: u64) -> Got {
    assert_eq!(
        d.recv, d.context.0,
        "the delivery carries another receive's descriptor"
    );
    Got {
        ctx: d.context.0,
        no,
        header: d.header,
        offset: d.offset,
        placed: d.placed,
        multi: d.multi_recv,
        released: d.released,
    }
}

fn taken(t: &Taken<usize, u64>) -> Got {
    got(&t.delivery, t.message.payload)
}

/// Runs one operation on the matcher and states the outcome in the model's terms.
fn apply(m: &mut M, op: &Op, ctx: usize, no: u64, claims: &[usize], posts: &[usize]) -> Ev {
    match *op {
        Op::Post(kind, p, t, i, c) => match m.post(kind, spec(&recv(kind, p, t, i, c, ctx)), ctx) {
            Post::Matched(t) => Ev::Delivered(taken(&t)),
            Post::Queued => Ev::Queued,
        },
        Op::PostMulti(p, c, min) => {
            let mut out = vec![];
            let s = spec(&recv(Kind::Msg, p, 0, 0, c, ctx));
            let posted = m.post_multi(s, min, ctx, &mut out);
            Ev::Multi {
                got: out.iter().map(taken).collect(),
                posted,
            }
        }
        Op::Arrive(kind, p, t, len, data, rndv) => {
            let h = header(p, t, len, data, rndv);
            match m.arrive(kind, h, |_| no) {
                Arrival::Matched(d) => Ev::Delivered(got(&d, no)),
                Arrival::Buffered(id) => {
                    assert_eq!(m.unexpected(id).map(|(_, u)| *u), Some(no));
                    Ev::Buffered
                }
            }
        }
        Op::Peek(kind, p, t, i) => match m.peek(kind, &spec(&recv(kind, p, t, i, 0, ctx))) {
            Peek::Found(h) => Ev::Found(h),
            Peek::NoMessage => Ev::NoMessage,
        },
        Op::PeekClaim(kind, p, t, i) => {
            match m.peek_claim(kind, &spec(&recv(kind, p, t, i, 0, ctx))) {
                Peek::Found((h, id)) => Ev::Claimed(*m.unexpected(id).unwrap().1, h),
                Peek::NoMessage => Ev::NoMessage,
            }
        }
        Op::PeekDiscard(kind, p, t, i) => {
            match m.peek_discard(kind, &spec(&recv(kind, p, t, i, 0, ctx))) {
                Peek::Found(u) => Ev::Discarded(u.payload),
                Peek::NoMessage => Ev::NoMessage,
            }
        }
        Op::Claim(kind, pick, cap, discard) => {
            let c = pick_ctx(claims, pick);
            if discard {
                match m.claim_discard(kind, Context(c)) {
                    Some(u) => Ev::Discarded(u.payload),
                    None => Ev::NotClaimed,
                }
            } else {
                match m.claim(kind, spec(&recv(kind, None, 0, 0, cap, c)), c) {
                    Ok(t) => Ev::Delivered(taken(&t)),
                    Err(r) => {
                        assert_eq!(r, c);
                        Ev::NotClaimed
                    }
                }
            }
        }
        Op::Cancel(pick) => match m.cancel(Context(pick_ctx(posts, pick))) {
            Some(c) => {
                assert_eq!(c.recv, c.context.0);
                Ev::Cancelled {
                    ctx: c.context.0,
                    kind: c.kind,
                    multi: c.multi_recv,
                }
            }
            None => Ev::NotCancelled,
        },
    }
}

/// The model's version of the same operation.
fn model_apply(
    model: &mut Model,
    op: &Op,
    ctx: usize,
    no: u64,
    claims: &[usize],
    posts: &[usize],
) -> Ev {
    match *op {
        Op::Post(kind, p, t, i, c) => model.post(recv(kind, p, t, i, c, ctx)),
        Op::PostMulti(p, c, min) => model.post_multi(Recv {
            multi: Some((0, min)),
            ..recv(Kind::Msg, p, 0, 0, c, ctx)
        }),
        Op::Arrive(kind, p, t, len, data, rndv) => {
            model.arrive(kind, no, header(p, t, len, data, rndv))
        }
        Op::Peek(kind, p, t, i) => model.peek(&recv(kind, p, t, i, 0, ctx)),
        Op::PeekClaim(kind, p, t, i) => model.peek_claim(&recv(kind, p, t, i, 0, ctx)),
        Op::PeekDiscard(kind, p, t, i) => model.peek_discard(&recv(kind, p, t, i, 0, ctx)),
        Op::Claim(kind, pick, cap, discard) => {
            let c = pick_ctx(claims, pick);
            if discard {
                model.claim_discard(kind, c)
            } else {
                model.claim(kind, c, cap)
            }
        }
        Op::Cancel(pick) => model.cancel(pick_ctx(posts, pick)),
    }
}

fn header(p: u32, tag: u64, len: usize, data: Option<u64>, rndv: Option<u64>) -> Header {
    Header {
        peer: PeerId(p),
        tag,
        data,
        len,
        protocol: rndv.map_or(Protocol::Eager, |handle| Protocol::Rendezvous { handle }),
    }
}

/// A context used earlier (possibly by an operation long finished), or one never used.
fn pick_ctx(used: &[usize], pick: usize) -> usize {
    if used.is_empty() {
        0
    } else {
        used[pick % used.len()]
    }
}

/// The two ordering rules, checked on a delivery against the queues before the operation.
fn check_order(before: &Model, g: &Got, kind: Kind, recv_spec: &Recv) -> Result<(), TestCaseError> {
    for older in before.unexpected.iter().filter(|o| o.no < g.no) {
        prop_assert!(
            !(older.header.peer == g.header.peer && takes(recv_spec, older.kind, &older.header)),
            "message {} overtook message {} from the same peer into receive {}",
            g.no,
            older.no,
            g.ctx
        );
    }
    for older in before.posted.iter().filter(|r| r.ctx < g.ctx) {
        prop_assert!(
            !takes(older, kind, &g.header),
            "receive {} served before older receive {} for message {}",
            g.ctx,
            older.ctx,
            g.no
        );
    }
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut m = M::default();
    let mut model = Model::default();
    let (mut claims, mut posts) = (vec![], vec![]);
    for (i, op) in ops.iter().enumerate() {
        // Contexts and message numbers both follow the operation index, so "older" is "<".
        let (ctx, no) = (i + 1, i as u64 + 1);
        let before_posted = model.posted.clone();
        let before_unexpected = model.unexpected.clone();
        let want = model_apply(&mut model, op, ctx, no, &claims, &posts);
        let have = apply(&mut m, op, ctx, no, &claims, &posts);
        prop_assert_eq!(&have, &want, "operation {} {:?}", i, op);

        let mut before = Model {
            posted: before_posted,
            unexpected: before_unexpected,
            claimed: vec![],
        };
        let delivered: Vec<&Got> = match &have {
            Ev::Delivered(g) => vec![g],
            Ev::Multi { got, .. } => got.iter().collect(),
            _ => vec![],
        };
        // The receive each delivery went to; claims bypass the order by design.
        let (kind, new_recv) = match *op {
            Op::Post(kind, p, t, i, c) => (kind, Some(recv(kind, p, t, i, c, ctx))),
            Op::PostMulti(p, c, _) => (Kind::Msg, Some(recv(Kind::Msg, p, 0, 0, c, ctx))),
            Op::Arrive(kind, ..) => (kind, None),
            _ => (Kind::Msg, None),
        };
        if matches!(op, Op::Post(..) | Op::PostMulti(..) | Op::Arrive(..)) {
            for g in delivered {
                let r = match &new_recv {
                    Some(r) => r.clone(),
                    None => before
                        .posted
                        .iter()
                        .find(|r| r.ctx == g.ctx)
                        .cloned()
                        .unwrap(),
                };
                check_order(&before, g, kind, &r)?;
                // Pieces of one multi-receive post are taken in turn.
                before.unexpected.retain(|u| u.no != g.no);
            }
        }

        match op {
            Op::Post(..) | Op::PostMulti(..) => posts.push(ctx),
            Op::PeekClaim(..) => claims.push(ctx),
            _ => {}
        }
        for kind in [Kind::Msg, Kind::Tagged] {
            let s = m.stats(kind);
            let posted = model.posted.iter().filter(|r| r.kind == kind).count();
            let waiting = model.unexpected.iter().filter(|u| u.kind == kind).count();
            let claimed = model.claimed.iter().filter(|(_, u)| u.kind == kind).count();
            prop_assert_eq!(
                (s.posted, s.unexpected, s.claimed),
                (posted, waiting, claimed)
            );
        }
        let held: usize = model
            .unexpected
            .iter()
            .chain(model.claimed.iter().map(|(_, u)| u))
            .map(|u| unexpected_charge::<u64>(&u.header))
            .sum();
        prop_assert_eq!(m.account().current(), held);
    }
    drain(&mut m, &model, ops.len() + 1)
}

/// Empties every queue through the public operations; nothing may stay charged or allocated.
fn drain(m: &mut M, model: &Model, ctx: usize) -> Result<(), TestCaseError> {
    for (c, u) in &model.claimed {
        prop_assert!(m.claim_discard(u.kind, Context(*c)).is_some());
    }
    for kind in [Kind::Msg, Kind::Tagged] {
        let all = RecvSpec::tagged(PeerId::ANY, 0, u64::MAX, usize::MAX, Context(ctx));
        while let Post::Matched(_) = m.post(kind, all, ctx) {}
        prop_assert!(m.cancel(Context(ctx)).is_some());
    }
    for r in &model.posted {
        prop_assert!(m.cancel(Context(r.ctx)).is_some());
    }
    for kind in [Kind::Msg, Kind::Tagged] {
        prop_assert_eq!(m.stats(kind), Stats::default());
    }
    prop_assert_eq!(m.account().current(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn matcher_agrees_with_the_reference_model(ops in prop::collection::vec(op(), 1..200)) {
        run(&ops)?;
    }
}
