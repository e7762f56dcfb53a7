//! Prints what one RC connection costs each of the two ranks it joins, as JSON:
//! `diwarp-rc-cost [BURST_BYTES]` (default 4 MiB in flight). `busy` is the figure
//! `scripts/mem-report --rc-cost` takes.

fn main() {
    let burst = match std::env::args().nth(1).map(|s| s.parse::<usize>()) {
        None => 4 << 20,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("diwarp-rc-cost: BURST_BYTES: {e}");
            std::process::exit(2);
        }
    };
    match diwarp_fi::memory::rc_cost::measure(burst) {
        Ok(c) => {
            let mut v = serde_json::to_value(c).expect("serialises");
            v["busy"] = c.busy().into();
            println!("{v}");
        }
        Err(e) => {
            eprintln!("diwarp-rc-cost: {e}");
            std::process::exit(1);
        }
    }
}
