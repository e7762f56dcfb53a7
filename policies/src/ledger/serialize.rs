//! The ledger in reports: `{"total", "total_peak", "samples", "accounts": {name: {...}}}`,
//! accounts in [`Account::ALL`] order.

use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};

use super::{Account, Entry, Ledger};

struct Named(Account, Entry);

impl Serialize for Named {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Named(a, e) = self;
        let mut st = s.serialize_struct("Account", 4)?;
        st.serialize_field("current", &e.current)?;
        st.serialize_field("peak", &e.peak)?;
        st.serialize_field("peers", &e.peers)?;
        st.serialize_field("scale", &a.scale())?;
        st.end()
    }
}

struct Accounts<'a>(&'a Ledger);

impl Serialize for Accounts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(Account::ALL.len()))?;
        for (a, e) in self.0.iter() {
            m.serialize_entry(a.name(), &Named(a, e))?;
        }
        m.end()
    }
}

impl Serialize for Ledger {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Ledger", 4)?;
        st.serialize_field("total", &self.total())?;
        st.serialize_field("total_peak", &self.total_peak())?;
        st.serialize_field("samples", &self.samples())?;
        st.serialize_field("accounts", &Accounts(self))?;
        st.end()
    }
}
