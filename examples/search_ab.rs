//! Compares `piidx search` latency of several piidx binaries on one database:
//! whole processes, as a user runs them, interleaved so that the machine's
//! drift hits every binary alike.
//!
//! ```sh
//! cargo run --release --example search_ab -- --db bench/out/piidx.db --runs 21 \
//!     /tmp/old/piidx target/release/piidx [-q 'the' -q 'fn main' ...]
//! ```
//!
//! Each round runs every query once with every binary, back to back (the
//! order alternates between rounds), with output to /dev/null. It prints
//! each binary's median and p95 per query and over all queries, and for
//! every binary after the first the median of the paired differences
//! against the first: on a VM whose speed drifts by more than the change
//! being measured, the pairs still compare like with like. Before timing,
//! it checks that every binary prints the same `--json` output for each
//! query. The default queries are `bench/run`'s; `-q` adds the search's
//! own arguments after ` ;; ` separators: `-q 'the ;; --sort ;; recent'`.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

const DEFAULT_QUERIES: &[&str] = &[
    "the",
    "error",
    "file",
    "serde_json",
    "fn main",
    "\"parser assumes every line\"",
    "zyzzyvarium",
    "deseri*",
];

struct Args {
    db: PathBuf,
    runs: usize,
    limit: String,
    binaries: Vec<PathBuf>,
    queries: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: PathBuf::new(),
        runs: 21,
        limit: "20".to_owned(),
        binaries: Vec::new(),
        queries: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--db" => args.db = PathBuf::from(value("--db")?),
            "--runs" => {
                args.runs = value("--runs")?
                    .parse()
                    .map_err(|_| "--runs takes a number".to_owned())?;
            }
            "--limit" => args.limit = value("--limit")?,
            "-q" | "--query" => args.queries.push(value("--query")?),
            "-h" | "--help" => return Err(String::new()),
            _ => args.binaries.push(PathBuf::from(arg)),
        }
    }
    if args.db.as_os_str().is_empty() || args.binaries.is_empty() || args.runs == 0 {
        return Err("pass --db DB and at least one piidx binary".to_owned());
    }
    if args.queries.is_empty() {
        args.queries = DEFAULT_QUERIES.iter().map(|q| (*q).to_owned()).collect();
    }
    Ok(args)
}

fn search(args: &Args, binary: &PathBuf, query: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("search")
        .args(query.split(" ;; "))
        .args(["--json", "--limit", &args.limit, "--db"])
        .arg(&args.db);
    command
}

/// Wall milliseconds of one whole `piidx search` process.
fn time_one(args: &Args, binary: &PathBuf, query: &str) -> Result<f64, String> {
    let start = Instant::now();
    let status = search(args, binary, query)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|err| format!("cannot run {}: {err}", binary.display()))?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if !status.success() {
        return Err(format!("{} search {query:?}: {status}", binary.display()));
    }
    Ok(ms)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Nearest-rank p95, as `bench/run` reports it.
fn p95(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (0.95 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn run(args: &Args) -> Result<(), String> {
    for query in &args.queries {
        let outputs: Vec<Vec<u8>> = args
            .binaries
            .iter()
            .map(|binary| {
                search(args, binary, query)
                    .output()
                    .map(|out| out.stdout)
                    .map_err(|err| format!("cannot run {}: {err}", binary.display()))
            })
            .collect::<Result<_, _>>()?;
        if outputs.windows(2).any(|pair| pair[0] != pair[1]) {
            println!("note: the binaries print different hits for {query:?}");
        }
    }
    // times[binary][query][round]
    let mut times =
        vec![vec![Vec::with_capacity(args.runs); args.queries.len()]; args.binaries.len()];
    for round in 0..args.runs {
        for (q, query) in args.queries.iter().enumerate() {
            let mut order: Vec<usize> = (0..args.binaries.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for b in order {
                times[b][q].push(time_one(args, &args.binaries[b], query)?);
            }
        }
    }
    println!("| query | {} |", header(args));
    println!("|---|{}", "---|".repeat(args.binaries.len()));
    for (q, query) in args.queries.iter().enumerate() {
        let cells: Vec<String> = times
            .iter()
            .map(|by_query| {
                let runs = &by_query[q];
                format!("{:.1} / {:.1}", median(runs), p95(runs))
            })
            .collect();
        println!("| `{query}` | {} |", cells.join(" | "));
    }
    let all: Vec<Vec<f64>> = times.iter().map(|by_query| by_query.concat()).collect();
    let cells: Vec<String> = all
        .iter()
        .map(|runs| format!("**{:.1} / {:.1}**", median(runs), p95(runs)))
        .collect();
    println!("| all | {} |", cells.join(" | "));
    println!();
    for (b, binary) in args.binaries.iter().enumerate().skip(1) {
        let pairs: Vec<f64> = all[b].iter().zip(&all[0]).map(|(x, y)| x - y).collect();
        println!(
            "{} − {}: median paired difference {:+.2} ms over {} pairs",
            binary.display(),
            args.binaries[0].display(),
            median(&pairs),
            pairs.len()
        );
    }
    Ok(())
}

fn header(args: &Args) -> String {
    args.binaries
        .iter()
        .map(|binary| format!("{} median / p95 ms", binary.display()))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("search_ab: {message}");
            }
            eprintln!(
                "usage: search_ab --db DB [--runs N] [--limit N] [-q QUERY ...] PIIDX [PIIDX ...]"
            );
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("search_ab: {message}");
            ExitCode::FAILURE
        }
    }
}
