//! diwarp's memory reports (the JSON lines FI_DIWARP_MEM_REPORT makes every rank write): each
//! rank's "finalize" line of every finished run, as the rows of ledger.csv.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::numbers::{round1, shortest};
use crate::harness::csv;

pub const SCHEMA: &str = "diwarp-mem-report/1";

/// One rank's finalize line: column → value (`Null` for none).
pub type Row = HashMap<String, Value>;

/// Every finalize line read, by (transport, ranks), in the order of reports.csv.
#[derive(Default)]
pub struct Ledger {
    pub rows: BTreeMap<(String, u32), Vec<Row>>,
    /// The accounts, in the order the reports first name them, with their scale.
    pub accounts: Vec<(String, String)>,
    /// What could not be read, one sentence each.
    pub problems: Vec<String>,
}

/// The columns after the accounts'.
const TAIL: [&str; 13] = [
    "total",
    "total_peak",
    "peer_bytes",
    "peers",
    "per_peer",
    "explained",
    "unexplained",
    "provider_heap",
    "kernel_held",
    "ep_sockets",
    "rc_open",
    "rc_open_peak",
    "rc_connected",
];

/// The names of `ledger.accounts` in the order the line gives them (serde_json's maps sort
/// their keys, and the columns keep the provider's order).
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, IgnoredAny)) = m.next_entry::<String, IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
struct OrderLedger {
    accounts: Keys,
}

#[derive(Deserialize)]
struct Order {
    ledger: OrderLedger,
}

/// The number after `"key":` in `line`, read exactly (serde_json's own reading of a long
/// fraction may miss its last bit, and ledger.csv gives the provider's figure as written).
fn exact_number(line: &str, key: &str) -> Option<f64> {
    let pat = format!("\"{key}\":");
    let at = line.find(&pat)? + pat.len();
    let rest = line[at..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// `v[k]`, or the key missing.
fn at<'a>(v: &'a Value, k: &'static str) -> Result<&'a Value, &'static str> {
    v.get(k).ok_or(k)
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// `o.get(k) or {}` as an object's field reader.
fn object_or_empty(v: Option<&Value>) -> Value {
    match v {
        Some(x) if truthy(Some(x)) => x.clone(),
        _ => Value::Object(serde_json::Map::new()),
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The row of one finalize line `o` (text `line`), its accounts in `names`' order; or the
/// field it misses.
fn row(o: &Value, line: &str, names: &[String]) -> Result<Row, &'static str> {
    let accs = at(at(o, "ledger")?, "accounts")?;
    let (mut peer_bytes, mut per_peer, mut peers) = (0i64, 0.0f64, None::<&Value>);
    let mut r = Row::new();
    for name in names {
        let a = accs.get(name).ok_or("accounts")?;
        let (cur, peak) = (at(a, "current")?, at(a, "peak")?);
        if a.get("scale").and_then(Value::as_str) == Some("peers") && truthy(a.get("peers")) {
            // per peer: each account over the peers it covers (address_vector covers the rank
            // too); peers: the fewest any covers, the remote peers (as scripts/mem-report).
            let p = &a["peers"];
            peer_bytes += cur.as_i64().unwrap_or(0);
            per_peer += num(cur) / num(p);
            if peers.is_none_or(|q| num(p) < num(q)) {
                peers = Some(p);
            }
        }
        r.insert(format!("{name}_current"), cur.clone());
        r.insert(format!("{name}_peak"), peak.clone());
    }
    let kernel = object_or_empty(o.get("kernel"));
    let paths = object_or_empty(object_or_empty(o.get("counters")).get("paths"));
    let field = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let mut explained = at(at(o, "growth")?, "explained")?.clone();
    if explained.is_f64() {
        if let Some(x) = exact_number(line, "explained") {
            explained = Value::from(x);
        }
    }
    let ledger = at(o, "ledger")?;
    r.insert("pid".into(), at(o, "pid")?.clone());
    r.insert("total".into(), at(ledger, "total")?.clone());
    r.insert("total_peak".into(), at(ledger, "total_peak")?.clone());
    r.insert("peer_bytes".into(), peer_bytes.into());
    r.insert("peers".into(), peers.cloned().unwrap_or(Value::from(0)));
    r.insert("per_peer".into(), Value::from(round1(per_peer)));
    r.insert("explained".into(), explained);
    r.insert("unexplained".into(), at(o, "unexplained")?.clone());
    r.insert(
        "provider_heap".into(),
        at(at(o, "heap")?, "provider")?.clone(),
    );
    r.insert("kernel_held".into(), field(&kernel, "held"));
    r.insert("ep_sockets".into(), field(&kernel, "sockets"));
    r.insert("rc_open".into(), field(&paths, "open"));
    r.insert("rc_open_peak".into(), field(&paths, "open_peak"));
    r.insert("rc_connected".into(), field(&paths, "connected"));
    Ok(r)
}

/// The reports listed in `<out>/reports.csv`.
pub fn read(out: &Path) -> io::Result<Ledger> {
    let mut l = Ledger::default();
    let (head, rows) = csv::rows(&fs::read_to_string(out.join("reports.csv"))?);
    let col = |name: &str| {
        head.iter().position(|h| h == name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reports.csv: no column {name}"),
            )
        })
    };
    let (ct, cn, cr, cf) = (col("transport")?, col("ranks")?, col("run")?, col("file")?);
    for rep in rows {
        let (t, r, file) = (&rep[ct], &rep[cr], &rep[cf]);
        let n: u32 = rep[cn]
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "reports.csv: ranks"))?;
        let text = match fs::read_to_string(out.join(file)) {
            Ok(t) => t,
            Err(e) => {
                l.problems.push(format!("{file}: unreadable ({e})"));
                continue;
            }
        };
        let lines: Vec<&str> = text.lines().filter(|x| !x.trim().is_empty()).collect();
        let objs: Result<Vec<Value>, _> = lines.iter().map(|x| serde_json::from_str(x)).collect();
        let objs = match objs {
            Ok(o) => o,
            Err(e) => {
                l.problems.push(format!("{file}: unreadable ({e})"));
                continue;
            }
        };
        if objs
            .iter()
            .any(|o| o.get("schema").and_then(Value::as_str) != Some(SCHEMA))
        {
            l.problems.push(format!(
                "{file}: not {SCHEMA} (another provider version?); skipped"
            ));
            continue;
        }
        let finals: Vec<(&Value, &str)> = objs
            .iter()
            .zip(&lines)
            .filter(|(o, _)| o.get("at").and_then(Value::as_str) == Some("finalize"))
            .map(|(o, x)| (o, *x))
            .collect();
        if finals.len() != n as usize {
            l.problems.push(format!(
                "{file}: {} finalize lines for {n} ranks",
                finals.len()
            ));
        }
        for (o, line) in finals {
            let names = serde_json::from_str::<Order>(line).map_or_else(
                |_| {
                    o.pointer("/ledger/accounts")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default()
                },
                |x| x.ledger.accounts.0,
            );
            for name in &names {
                if !l.accounts.iter().any(|(a, _)| a == name) {
                    let scale = o["ledger"]["accounts"][name]
                        .get("scale")
                        .and_then(Value::as_str)
                        .unwrap_or("None");
                    l.accounts.push((name.clone(), scale.to_owned()));
                }
            }
            match row(o, line, &names) {
                Ok(mut x) => {
                    x.insert("transport".into(), Value::from(t.as_str()));
                    x.insert("ranks".into(), Value::from(n));
                    x.insert("run".into(), Value::from(r.as_str()));
                    l.rows.entry((t.clone(), n)).or_default().push(x);
                }
                Err(k) => {
                    let pid = o.get("pid").map_or("None".to_owned(), cell);
                    l.problems
                        .push(format!("{file}: pid {pid}: field '{k}' missing"));
                }
            }
        }
    }
    Ok(l)
}

/// A value as ledger.csv writes it: nothing for none, a float in its shortest form.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => shortest(n.as_f64().unwrap_or(0.0)),
        other => other.to_string(),
    }
}

/// ledger.csv: every row, by (transport, ranks), every account's current and peak.
pub fn csv_text(l: &Ledger) -> String {
    let mut cols: Vec<String> = ["transport", "ranks", "run", "pid"]
        .map(String::from)
        .into();
    for (a, _) in &l.accounts {
        cols.push(format!("{a}_current"));
        cols.push(format!("{a}_peak"));
    }
    cols.extend(TAIL.map(String::from));
    let mut out = cols.join(",") + "\n";
    for rows in l.rows.values() {
        for r in rows {
            let cells: Vec<String> = cols
                .iter()
                .map(|c| r.get(c).map_or(String::new(), cell))
                .collect();
            let _ = writeln!(out, "{}", cells.join(","));
        }
    }
    out
}

/// The median of column `k` over the rows of (`t`, `n`) that have it.
pub fn median_of(l: &Ledger, t: &str, n: u32, k: &str) -> Option<f64> {
    let v: Vec<f64> = l
        .rows
        .get(&(t.to_owned(), n))
        .into_iter()
        .flatten()
        .filter_map(|r| r.get(k)?.as_f64())
        .collect();
    super::numbers::median(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"schema":"diwarp-mem-report/1","pid":7,"at":"finalize","ledger":{"total":300,"total_peak":310,"accounts":{"zeta":{"current":100,"peak":120,"peers":2,"scale":"peers"},"alpha":{"current":200,"peak":200,"peers":null,"scale":"fixed"},"av":{"current":30,"peak":30,"peers":3,"scale":"peers"}}},"growth":{"explained":0.9876340283676349},"unexplained":5,"heap":{"provider":305},"kernel":{"held":4096,"sockets":3},"counters":{"paths":{"open":1,"open_peak":2,"connected":1}}}"#;

    #[test]
    fn a_finalize_line_as_a_row() {
        let dir = std::env::temp_dir().join(format!("diwarp-mem-report-{}", std::process::id()));
        fs::create_dir_all(dir.join("logs")).unwrap();
        let bad = LINE.replace(r#""heap":{"provider":305},"#, "");
        let interval = LINE.replace("finalize", "interval");
        fs::write(
            dir.join("logs/a.jsonl"),
            format!("{LINE}\n{interval}\n{bad}\n"),
        )
        .unwrap();
        fs::write(
            dir.join("reports.csv"),
            "transport,ranks,run,file\nmpich-diwarp,2,1,logs/a.jsonl\nmpich-diwarp,2,2,logs/none.jsonl\n",
        )
        .unwrap();
        let l = read(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        // The provider's order, not the keys sorted.
        let names: Vec<&str> = l.accounts.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha", "av"]);
        assert_eq!(l.problems.len(), 2, "{:?}", l.problems);
        assert_eq!(l.problems[0], "logs/a.jsonl: pid 7: field 'heap' missing");
        assert!(l.problems[1].starts_with("logs/none.jsonl: unreadable ("));
        let text = csv_text(&l);
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "transport,ranks,run,pid,zeta_current,zeta_peak,alpha_current,alpha_peak,av_current,\
             av_peak,total,total_peak,peer_bytes,peers,per_peer,explained,unexplained,\
             provider_heap,kernel_held,ep_sockets,rc_open,rc_open_peak,rc_connected"
        );
        // per peer: 100/2 + 30/3; peers: the fewest any covers.
        assert_eq!(
            lines.next().unwrap(),
            "mpich-diwarp,2,1,7,100,120,200,200,30,30,300,310,130,2,60.0,0.9876340283676349,5,\
             305,4096,3,1,2,1"
        );
        assert_eq!(lines.next(), None);
        assert_eq!(median_of(&l, "mpich-diwarp", 2, "per_peer"), Some(60.0));
        assert_eq!(median_of(&l, "mpich-diwarp", 4, "per_peer"), None);
    }

    #[test]
    fn exact_numbers_and_cells() {
        assert_eq!(exact_number(LINE, "explained"), Some(0.9876340283676349));
        assert_eq!(exact_number(r#"{"x": 1e-3}"#, "x"), Some(0.001));
        assert_eq!(exact_number(r#"{"x":null}"#, "x"), None);
        assert_eq!(cell(&Value::Null), "");
        assert_eq!(cell(&Value::from(6227.0)), "6227.0");
        assert_eq!(cell(&Value::from(12)), "12");
        assert_eq!(cell(&Value::from("1")), "1");
    }
}
