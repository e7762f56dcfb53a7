use super::*;

#[test]
fn opcode_table() {
    for (i, op) in Opcode::ALL.iter().enumerate() {
        assert_eq!(Opcode::try_from(i as u8), Ok(*op));
        assert_eq!(*op as u8, i as u8);
    }
    for v in 0xc..=0xff {
        assert_eq!(Opcode::try_from(v), Err(Error::UnknownOpcode(v)));
    }
    let tagged: Vec<_> = Opcode::ALL.iter().filter(|o| o.is_tagged()).collect();
    assert_eq!(tagged, [&Opcode::RdmaWrite, &Opcode::ReadResponse]);
    assert_eq!(Opcode::Send.control_byte(), 0x43);
    assert_eq!(Opcode::AtomicResponse.control_byte(), 0x4b);
}

#[test]
fn short_op_headers() {
    let big = [0u8; 64];
    for n in 0..ReadRequestRepr::LEN {
        assert_eq!(
            ReadRequestRepr::parse(&big[..n]).unwrap_err(),
            Error::Truncated { need: 28, have: n }
        );
    }
    for n in 0..AtomicRequestRepr::LEN {
        assert!(matches!(
            AtomicRequestRepr::parse(&big[..n]),
            Err(Error::Truncated { need: 52, .. })
        ));
    }
    let mut small = [0u8; 11];
    assert_eq!(
        AtomicResponseRepr {
            request_id: 1,
            original: 2
        }
        .emit(&mut small),
        Err(Error::Truncated { need: 12, have: 11 })
    );
}
