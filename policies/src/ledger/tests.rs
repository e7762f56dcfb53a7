use proptest::prelude::*;

use super::*;

#[test]
fn charges_add_and_peaks_stay() {
    let mut l = Ledger::default();
    let mut s = Sample::default();
    s.charge(Account::PeerState, Usage::per_peer(900, 3))
        .charge(Account::PeerState, Usage::per_peer(100, 1))
        .charge(
            Account::Unexpected,
            Usage {
                bytes: 10,
                peak: 500,
                peers: None,
            },
        );
    l.record(&s);
    assert_eq!(
        l.get(Account::PeerState),
        Entry {
            current: 1000,
            peak: 1000,
            peers: Some(4)
        }
    );
    assert_eq!(
        l.get(Account::Unexpected).peak,
        500,
        "the layer's own peak counts"
    );
    assert_eq!(l.total(), 1010);
    l.record(&Sample::default());
    assert_eq!(l.total(), 0);
    assert_eq!(l.get(Account::PeerState).peak, 1000);
    assert_eq!(l.total_peak(), 1010);
    assert_eq!(l.samples(), 2);
}

#[test]
fn serialises_every_account_in_order() {
    let mut l = Ledger::default();
    let mut s = Sample::default();
    s.charge(Account::Retransmit, Usage::bytes(42));
    l.record(&s);
    let v: serde_json::Value = serde_json::to_value(&l).unwrap();
    assert_eq!(v["total"], 42);
    assert_eq!(v["accounts"]["retransmit"]["current"], 42);
    assert_eq!(v["accounts"]["retransmit"]["scale"], "traffic");
    assert_eq!(v["accounts"]["peer_state"]["scale"], "peers");
    let text = serde_json::to_string(&l).unwrap();
    let mut last = 0;
    for a in Account::ALL {
        let at = text.find(&format!("\"{}\":", a.name())).expect("present");
        assert!(at > last, "{} out of order", a.name());
        last = at;
    }
}

proptest! {
    /// Whatever the samples, an account's peak is the most it or its layer ever reported, and
    /// the total's peak lies between the largest sample total and the sum of the peaks.
    #[test]
    fn peaks_are_maxima(samples in proptest::collection::vec(
        proptest::collection::vec((0usize..Account::ALL.len(), 0usize..1 << 20, 0usize..1 << 20), 0..8),
        1..20,
    )) {
        let mut l = Ledger::default();
        let mut most = vec![0usize; Account::ALL.len()];
        let mut most_total = 0;
        for charges in &samples {
            let mut s = Sample::default();
            for &(a, bytes, peak) in charges {
                s.charge(Account::ALL[a], Usage { bytes, peak, peers: None });
            }
            for (i, &a) in Account::ALL.iter().enumerate() {
                let u = s.get(a);
                most[i] = most[i].max(u.bytes).max(u.peak);
            }
            most_total = most_total.max(s.total());
            l.record(&s);
        }
        for (i, &a) in Account::ALL.iter().enumerate() {
            prop_assert_eq!(l.get(a).peak, most[i]);
        }
        prop_assert_eq!(l.total_peak(), most_total);
        prop_assert!(l.total_peak() <= most.iter().sum::<usize>());
    }
}
