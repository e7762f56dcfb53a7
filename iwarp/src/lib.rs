//! iWARP for diwarp: byte-exact wire formats ([`wire`]) and a small verbs API of queue pairs
//! ([`verbs`]) over UDP (datagram-iWARP, seed 000) and TCP (standard iWARP over MPA).

pub mod auth;
pub mod crc;
pub mod verbs;
pub mod wire;
