//! A switched descriptor's state, and the kind of conduit it carries its data over. Above
//! `stream` and `datagram`, which know only the `conduit` trait beneath them.

use std::ops::{Deref, DerefMut};

use crate::conduit::Conduit;
use crate::datagram::Datagram;
use crate::stream::Stream;

/// A switched descriptor's state.
pub struct Switched {
    /// The program's descriptor is in non-blocking mode (the queue pair's duplicate shares
    /// its file, which the queue pair keeps non-blocking, so the library keeps the mode).
    pub nonblock: bool,
    /// The `fork` generation it was switched in (a child cannot use its parent's).
    pub generation: u64,
    pub conduit: Carrier,
}

/// The conduit of a switched descriptor: an RC byte stream or RD datagrams. Either is a
/// [`Conduit`] (through `Deref`); only the stream offers the extensions.
pub enum Carrier {
    Stream(Box<Stream>),
    Datagram(Box<Datagram>),
}

impl Carrier {
    /// The RC byte stream, whose queue pair offers the extensions (`extensions`).
    pub fn as_stream(&mut self) -> Option<&mut Stream> {
        match self {
            Carrier::Stream(s) => Some(s),
            Carrier::Datagram(_) => None,
        }
    }
}

impl Deref for Carrier {
    type Target = dyn Conduit;

    fn deref(&self) -> &(dyn Conduit + 'static) {
        match self {
            Carrier::Stream(s) => &**s,
            Carrier::Datagram(d) => &**d,
        }
    }
}

impl DerefMut for Carrier {
    fn deref_mut(&mut self) -> &mut (dyn Conduit + 'static) {
        match self {
            Carrier::Stream(s) => &mut **s,
            Carrier::Datagram(d) => &mut **d,
        }
    }
}
