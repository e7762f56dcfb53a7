//! Verbs-level ping-pong and streaming benchmark: both ends on loopback, in two processes.
//!
//! The parent process is the initiator; it starts a copy of itself as the responder, exchanges
//! addresses over a control TCP connection, then both run the same plan (derived from the same
//! arguments) so no per-step negotiation sits on the measured path.

mod args;
mod control;
mod link;
mod plan;
mod raw;
mod report;
mod verbs_link;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = args::Args::parse();
    let result = match args.role {
        args::Role::Initiator => plan::run_initiator(&args),
        args::Role::Responder => plan::run_responder(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp-pingpong ({:?}): {e}", args.role);
            ExitCode::FAILURE
        }
    }
}
