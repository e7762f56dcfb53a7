//! Tests of the matching rules, and a property test against a literal reference model.

mod model;
mod props;
mod rules;
