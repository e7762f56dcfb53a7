//! The job key an application hands the domain (`domain_attr.auth_key`): it comes before the
//! environment's, two domains with one key talk and with two keys do not, and
//! `FI_DIWARP_AUTH=on` with no key anywhere opens no domain.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tests::*;
use super::*;
use crate::auth::AuthParams;
use crate::domain::Domain;
use crate::fabric::Fabric;
use crate::info::{fi_version, offer, AuthKey, FABRIC_NAME};
use crate::params::Config;
use crate::raw::mem::UserMem;

const KEY_A: &[u8] = b"domain-key-aaaaaaaaaaaaaaaaaaaaa";
const KEY_B: &[u8] = b"domain-key-bbbbbbbbbbbbbbbbbbbbb";

fn fabric(auth: AuthParams) -> Arc<Fabric> {
    let config = Config {
        iface: Some("127.0.0.1".into()),
        peer_timeout: Duration::from_millis(500),
        auth,
        ..Config::default()
    };
    Fabric::open(FABRIC_NAME, config).unwrap()
}

/// A domain of `f` handed `key` as its `auth_key`, through the negotiation an info takes.
fn domain(f: &Arc<Fabric>, key: Option<&[u8]>) -> crate::error::Result<Arc<Domain>> {
    let v = fi_version(1, 17);
    let mut info = offer(v);
    if let Some(k) = key {
        info.domain.auth_key_size = k.len();
        info.domain.auth_key = Some(AuthKey(k.to_vec()));
    }
    Domain::open(f, v, &info)
}

fn env_key(key: &str) -> AuthParams {
    AuthParams {
        key: Some(key.into()),
        ..AuthParams::default()
    }
}

/// A send from A to B, asked to complete on B's acknowledgement: its completion or error.
fn one_send(a: &Side, b: &Side) -> Got {
    let want = pattern(3000, 9);
    let buf = recv(b, 0, Kind::Tagged, 5, want.len(), 20);
    let (mem, _) = UserMem::owned(want.clone());
    a.ep.send(SendArgs {
        kind: Kind::Tagged,
        dest: 1,
        mem,
        tag: 5,
        data: None,
        context: 10,
        flags: FI_COMPLETION | FI_DELIVERY_COMPLETE,
    })
    .unwrap();
    let got = next(a, b);
    if matches!(got, Got::Ok(_)) {
        let c = ok(next(b, a));
        assert_eq!((c.op_context, c.tag, c.len), (20, 5, want.len()));
        assert!(*buf.lock() == want, "B's bytes differ");
    }
    got
}

#[test]
fn domains_with_one_auth_key_talk_and_with_two_do_not() {
    // The environment's key is another: the domains' keys come first.
    let f = fabric(env_key("environment-key-0123456789abcdef"));
    let (a, b) = (
        domain(&f, Some(KEY_A)).unwrap(),
        domain(&f, Some(KEY_A)).unwrap(),
    );
    let (ka, kf) = (
        a.job_key.as_ref().unwrap(),
        f.config.job_key.as_ref().unwrap(),
    );
    assert!(
        !Arc::ptr_eq(ka, kf),
        "the domain kept the environment's key"
    );
    let ((sa, _), (sb, _)) = pair_in(&a, &b);
    let c = ok(one_send(&sa, &sb));
    assert_eq!(c.op_context, 10);
    assert_eq!(sb.ep.with_data(|d| d.rd_stats().dropped_unauthenticated), 0);

    let c = domain(&f, Some(KEY_B)).unwrap();
    let ((sa, _), (sc, _)) = pair_in(&a, &c);
    let started = Instant::now();
    match one_send(&sa, &sc) {
        Got::Err(e) => {
            assert_eq!(e.err, Errno(FI_EIO as u32), "{e:?}");
            assert_eq!(e.completion.op_context, 10);
        }
        Got::Ok(c) => panic!("a send between two keys completed: {c:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // B heard A's datagrams and dropped them unread.
    let refused = sc.ep.with_data(|d| d.rd_stats().dropped_unauthenticated);
    assert!(refused > 0, "no datagram of A's was refused at B");
}

#[test]
fn an_auth_key_without_the_environments_and_auth_off() {
    // FI_DIWARP_AUTH=on and no key in the environment: the fabric opens, a domain needs one.
    let on = AuthParams {
        mode: Some(true),
        ..AuthParams::default()
    };
    let f = fabric(on);
    assert_eq!(domain(&f, None).unwrap_err(), Errno::INVAL);
    let d = domain(&f, Some(KEY_A)).unwrap();
    assert!(d.job_key.is_some());
    // Off is the user's word: a key handed to the domain does not turn the mode on.
    let off = AuthParams {
        mode: Some(false),
        ..AuthParams::default()
    };
    let f = fabric(off);
    assert!(domain(&f, Some(KEY_A)).unwrap().job_key.is_none());
    // No key anywhere, mode unset: off.
    let f = fabric(AuthParams::default());
    assert!(domain(&f, None).unwrap().job_key.is_none());
}
