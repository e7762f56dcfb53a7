use super::*;
use std::collections::HashMap;

struct Map(HashMap<&'static str, ParamValue>);

impl ParamSource for Map {
    fn get(&self, spec: &ParamSpec) -> Option<ParamValue> {
        self.0.get(spec.name).cloned()
    }
}

#[test]
fn unset_gives_defaults() {
    assert_eq!(Config::from_source(&Map(HashMap::new())), Config::default());
}

#[test]
fn values_are_taken_and_bad_ones_ignored() {
    let c = Config::from_source(&Map(HashMap::from([
        (IFACE, ParamValue::Str("lo".into())),
        (EAGER_SIZE, ParamValue::Size(4096)),
        (LINGER_MS, ParamValue::Int(-5)),
        (PEER_TIMEOUT_MS, ParamValue::Int(5000)),
        (RAIL_TIMEOUT_MS, ParamValue::Int(4000)),
        (RAIL_THREADS, ParamValue::Bool(true)),
        (DORMANT_MS, ParamValue::Int(0)),
        (MEM_REPORT, ParamValue::Str(String::new())),
        (MEM_REPORT_MS, ParamValue::Int(-1)),
        (MEM_BUDGET, ParamValue::Size(1000)),
        (CRC, ParamValue::Bool(false)),
        (DATAGRAM_SIZE, ParamValue::Size(9000)),
        (CONNECTED_PEERS, ParamValue::Size(0)),
        (PUSH_SIZE, ParamValue::Size(0)),
    ])));
    assert_eq!(c.iface.as_deref(), Some("lo"));
    assert_eq!(c.eager_size, 4096);
    assert_eq!(c.linger, Config::default().linger);
    assert_eq!(c.peer_timeout, Duration::from_secs(5));
    assert_eq!(
        c.rail_timeout,
        Duration::from_millis(2500),
        "capped at half the peer timeout"
    );
    assert!(c.rail_threads && !Config::default().rail_threads);
    assert_eq!(c.dormant_after, None, "0 keeps peers awake");
    assert_eq!(c.mem_report, None);
    assert_eq!(c.mem_report_every, None);
    assert_eq!(
        c.mem_budget,
        crate::data::budget::MIN,
        "raised to the least budget"
    );
    let r = Config::from_source(&Map(HashMap::from([(
        MEM_BUDGET,
        ParamValue::Size(8 << 20),
    )])));
    assert_eq!(r.mem_budget, 8 << 20);
    let r = Config::from_source(&Map(HashMap::from([(MEM_REPORT_MS, ParamValue::Int(250))])));
    assert_eq!(r.mem_report_every, Some(Duration::from_millis(250)));
    assert!(!c.crc && !c.crc_same_host);
    let d = Config::default();
    assert!(d.crc && !d.crc_same_host);
    assert_eq!(c.datagram_size, Some(9000));
    assert_eq!(c.connected_peers, 0);
    assert_eq!(c.push_size, 0);
    let on = Config::from_source(&Map(HashMap::from([(CRC, ParamValue::Bool(true))])));
    assert!(on.crc && on.crc_same_host);
    let c = Config::from_source(&Map(HashMap::from([(
        CONNECTED_PEERS,
        ParamValue::Size(CONNECTED_PEERS_MAX + 1),
    )])));
    assert_eq!(c.connected_peers, Config::default().connected_peers);
    let c = Config::from_source(&Map(HashMap::from([(
        PUSH_SIZE,
        ParamValue::Size(PUSH_SIZE_MAX + 1),
    )])));
    assert_eq!(c.push_size, Config::default().push_size);
    for bad in [0, 511, 65_508] {
        let c = Config::from_source(&Map(HashMap::from([(
            DATAGRAM_SIZE,
            ParamValue::Size(bad),
        )])));
        assert_eq!(c.datagram_size, None, "{bad}");
    }
}

#[test]
fn promotion_settings_are_taken_and_bad_ones_ignored() {
    use policies::promote::Mode;
    let c = Config::from_source(&Map(HashMap::from([
        (MODE, ParamValue::Str("hybrid".into())),
        (RC_MAX, ParamValue::Size(2)),
        (RC_MESSAGES, ParamValue::Int(4)),
        (RC_BYTES, ParamValue::Size(1000)),
        (RC_HALF_LIFE_MS, ParamValue::Int(50)),
        (RC_HYSTERESIS_MS, ParamValue::Int(0)),
        (RC_IDLE_MS, ParamValue::Int(300)),
        (RC_DATAGRAM_MAX, ParamValue::Size(65_507)),
    ])));
    assert_eq!(c.rc_datagram_max, 65_507);
    let big = Config::from_source(&Map(HashMap::from([(
        RC_DATAGRAM_MAX,
        ParamValue::Size(65_508),
    )])));
    assert_eq!(big.rc_datagram_max, Config::default().rc_datagram_max);
    let p = c.promote;
    assert_eq!((p.mode, p.cap), (Mode::Hybrid, 2));
    assert_eq!((p.promote_messages, p.promote_bytes), (4.0, 1000.0));
    assert_eq!(p.half_life, Duration::from_millis(50));
    assert_eq!(
        p.hysteresis,
        Config::default().promote.hysteresis,
        "0 ms refused"
    );
    assert_eq!(p.idle_limit, Duration::from_millis(300));
    for bad in ["tcp", "RC "] {
        let c = Config::from_source(&Map(HashMap::from([(MODE, ParamValue::Str(bad.into()))])));
        assert_eq!(c.promote.mode, Mode::Hybrid, "{bad}: the default");
    }
    let c = Config::from_source(&Map(HashMap::from([(MODE, ParamValue::Str("ud".into()))])));
    assert_eq!(c.promote.mode, Mode::Ud);
    let c = Config::from_source(&Map(HashMap::from([(MODE, ParamValue::Str("rc".into()))])));
    assert_eq!(c.promote.mode, Mode::Rc);
}

#[test]
fn stated_defaults_are_the_defaults() {
    for p in PARAMS {
        if let ParamDefault::Value(v) = p.default {
            let value = ParamValue::parse(p.kind, v).expect(p.name);
            let c = Config::from_source(&Map(HashMap::from([(p.name, value)])));
            assert_eq!(c, Config::default(), "{}={v}", p.env_name());
        }
    }
}

#[test]
fn values_parse_as_libfabric_reads_them() {
    use ParamValue as V;
    assert_eq!(V::parse(ParamKind::Size, " 0x10 "), Some(V::Size(16)));
    assert_eq!(V::parse(ParamKind::Size, "-1"), None);
    assert_eq!(V::parse(ParamKind::Int, "-1"), Some(V::Int(-1)));
    assert_eq!(V::parse(ParamKind::Int, "1e3"), None);
    assert_eq!(
        V::parse(ParamKind::Int, "4294967296"),
        None,
        "beyond C's int"
    );
    assert_eq!(V::parse(ParamKind::Bool, "Off"), Some(V::Bool(false)));
    assert_eq!(V::parse(ParamKind::Bool, "yes"), Some(V::Bool(true)));
    assert_eq!(V::parse(ParamKind::Bool, "2"), None);
    assert_eq!(V::parse(ParamKind::Str, " lo"), Some(V::Str(" lo".into())));
}

#[test]
fn names_are_unique_lower_case_identifiers() {
    for (i, p) in PARAMS.iter().enumerate() {
        assert!(p.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        assert!(!p.help.is_empty());
        assert!(PARAMS[..i].iter().all(|q| q.name != p.name));
    }
}

#[test]
fn port_range_is_parsed_or_kept_as_the_reason_it_is_not() {
    let with = |v: &str| {
        Config::from_source(&Map(HashMap::from([(
            PORT_RANGE,
            ParamValue::Str(v.into()),
        )])))
        .port_range
    };
    let r = with("50000-50010").unwrap().unwrap();
    assert_eq!((r.low, r.high), (50000, 50010));
    assert_eq!(with(""), Ok(None));
    assert_eq!(Config::default().port_range, Ok(None));
    let e = with("50010-50000").unwrap_err();
    assert!(
        e.starts_with("\"50010-50000\": ") && e.contains("low end"),
        "{e}"
    );
}
