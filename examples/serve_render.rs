//! How long headless Chromium takes to load and lay out pages of `piidx
//! serve` (for bench/serve-latency): each URL is opened ROUNDS times over
//! the DevTools protocol and the browser's own Navigation Timing is read:
//! the response (request sent → last byte), DOMContentLoaded and the load
//! event, and the first contentful paint, from the navigation's start.
//!
//!   cargo build --release --examples
//!   target/release/examples/serve_render [--rounds N] URL...
//!
//! Needs Debian's `chromium` (/usr/bin/chromium, or $CHROMIUM).

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

struct Page {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
}

impl Page {
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::text(message.to_string()))
            .map_err(|e| format!("send {method}: {e}"))?;
        loop {
            let Message::Text(text) = self.ws.read().map_err(|e| format!("read: {e}"))? else {
                continue;
            };
            let value: Value = serde_json::from_str(text.as_str()).map_err(|e| e.to_string())?;
            if value["id"] == json!(id) {
                if let Some(error) = value.get("error") {
                    return Err(format!("{method}: {error}"));
                }
                return Ok(value["result"].clone());
            }
        }
    }

    fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        )?;
        Ok(result["result"]["value"].clone())
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut rounds = 5;
    if let Some(at) = args.iter().position(|a| a == "--rounds") {
        rounds = args
            .get(at + 1)
            .and_then(|n| n.parse().ok())
            .ok_or("--rounds N")?;
        args.drain(at..at + 2);
    }
    if args.is_empty() {
        return Err("usage: serve_render [--rounds N] URL...".into());
    }
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let profile = std::env::temp_dir().join(format!("serve-render-{}", std::process::id()));
    let mut child = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-port=0",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{chromium}: {e}"))?;
    let stderr = BufReader::new(child.stderr.take().ok_or("no stderr")?);
    let mut url = None;
    for line in stderr.lines().map_while(Result::ok) {
        if let Some(at) = line.find("ws://") {
            url = Some(line[at..].trim().to_owned());
            break;
        }
    }
    let url = url.ok_or("chromium printed no DevTools address")?;
    let (ws, _) = tungstenite::connect(url.as_str()).map_err(|e| e.to_string())?;
    let mut page = Page {
        ws,
        session: String::new(),
        next: 0,
    };
    let target = page.call("Target.createTarget", json!({"url": "about:blank"}))?;
    let attached = page.call(
        "Target.attachToTarget",
        json!({"targetId": target["targetId"], "flatten": true}),
    )?;
    page.session = attached["sessionId"].as_str().unwrap_or("").to_owned();
    page.call("Page.enable", json!({}))?;
    println!(
        "{:<60} {:>10} {:>10} {:>10} {:>10}",
        "page (median of rounds, ms from navigation start)", "response", "FCP", "DOMready", "load"
    );
    for target in &args {
        let (mut response, mut fcp, mut ready, mut load) = (vec![], vec![], vec![], vec![]);
        for _ in 0..=rounds {
            page.call("Page.navigate", json!({"url": "about:blank"}))?;
            page.call("Page.navigate", json!({"url": target}))?;
            let deadline = Instant::now() + Duration::from_secs(60);
            let timing = loop {
                let value = page.eval(
                    "(() => { const n = performance.getEntriesByType('navigation')[0]; \
                     const p = performance.getEntriesByName('first-contentful-paint')[0]; \
                     return n && n.loadEventEnd > 0 && location.href !== 'about:blank' ? \
                     {response: n.responseEnd - n.requestStart, ready: n.domContentLoadedEventEnd, \
                      load: n.loadEventEnd, fcp: p ? p.startTime : null} : null })()",
                )?;
                if !value.is_null() {
                    break value;
                }
                if Instant::now() > deadline {
                    return Err(format!("{target} did not load"));
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            if response.len() < rounds + 1 {
                response.push(timing["response"].as_f64().unwrap_or(f64::NAN));
                ready.push(timing["ready"].as_f64().unwrap_or(f64::NAN));
                load.push(timing["load"].as_f64().unwrap_or(f64::NAN));
                if let Some(paint) = timing["fcp"].as_f64() {
                    fcp.push(paint);
                }
            }
        }
        // The first load warms the browser's and the server's caches.
        for list in [&mut response, &mut ready, &mut load] {
            list.remove(0);
        }
        if !fcp.is_empty() {
            fcp.remove(0);
        }
        // A paint the browser had not reported by the load event: "-".
        let paint = if fcp.is_empty() {
            "-".to_owned()
        } else {
            format!("{:.1}", median(&mut fcp))
        };
        println!(
            "{:<60} {:>10.1} {:>10} {:>10.1} {:>10.1}",
            target,
            median(&mut response),
            paint,
            median(&mut ready),
            median(&mut load)
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&profile);
    Ok(())
}
