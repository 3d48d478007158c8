//! The report as a person sees it: every sample's report.html opened in
//! headless Chromium (through the DevTools protocol), screenshotted into
//! `target/screenshots/`, and failed on any console error, uncaught
//! exception, script dialog or network request. A report built from hostile
//! log lines must run no script either.
//!
//! `.ci/run` installs Debian's chromium; where it is missing outside CI the
//! test says so and passes (it cannot run), in CI it fails.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

mod common;

fn chromium() -> Option<PathBuf> {
    let candidates = [
        std::env::var("CHROMIUM").ok(),
        Some("/usr/bin/chromium".into()),
        Some("/usr/bin/chromium-browser".into()),
    ];
    let found = candidates
        .into_iter()
        .flatten()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (.ci/run installs it)"
        );
        eprintln!("chromium not installed: browser test not run");
    }
    found
}

struct Browser {
    child: Child,
    ws: WebSocket<TcpStream>,
    next_id: u64,
    /// Events seen while waiting for replies.
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn launch(exe: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(exe)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
                "--window-size=1280,1600",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("chromium starts");
        let url = devtools_url(&mut child);
        let addr = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let (ws, _) = tungstenite::client(url.as_str(), stream).expect("devtools websocket");
        Browser {
            child,
            ws,
            next_id: 1,
            events: Vec::new(),
            _profile: profile,
        }
    }

    /// Sends a command and waits for its reply, keeping the events.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        loop {
            let v = self.read();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    fn read(&mut self) -> Value {
        loop {
            match self.ws.read().expect("devtools message") {
                Message::Text(t) => return serde_json::from_str(&t).unwrap(),
                Message::Binary(b) => return serde_json::from_slice(&b).unwrap(),
                _ => {}
            }
        }
    }

    fn wait_for(&mut self, method: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.events.iter().any(|e| e["method"] == method) {
            assert!(Instant::now() < deadline, "no {method}");
            let v = self.read();
            self.events.push(v);
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn devtools_url(child: &mut Child) -> String {
    let stderr = child.stderr.take().unwrap();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if let Some(at) = line.find("ws://") {
            return line[at..].trim().to_string();
        }
    }
    panic!("chromium printed no DevTools address");
}

/// Opens `report` in a fresh tab; returns the problems seen and saves a screenshot.
fn open_report(browser: &mut Browser, report: &Path, shot: &Path) -> Vec<String> {
    let target = browser.call(None, "Target.createTarget", json!({"url": "about:blank"}));
    let attached = browser.call(
        None,
        "Target.attachToTarget",
        json!({"targetId": target["targetId"], "flatten": true}),
    );
    let session = attached["sessionId"].as_str().unwrap().to_string();
    let s = Some(session.as_str());
    for domain in [
        "Page.enable",
        "Runtime.enable",
        "Log.enable",
        "Network.enable",
    ] {
        browser.call(s, domain, json!({}));
    }
    browser.events.clear();
    let url = format!("file://{}", report.display());
    browser.call(s, "Page.navigate", json!({"url": url}));
    browser.wait_for("Page.loadEventFired");
    let png = browser.call(
        s,
        "Page.captureScreenshot",
        json!({"format": "png", "captureBeyondViewport": true}),
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(png["data"].as_str().unwrap())
        .unwrap();
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    std::fs::write(shot, bytes).unwrap();
    browser.call(
        None,
        "Target.closeTarget",
        json!({"targetId": target["targetId"]}),
    );
    problems(&browser.events, &url)
}

fn problems(events: &[Value], page: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let p = &e["params"];
        match e["method"].as_str().unwrap_or("") {
            "Runtime.exceptionThrown" => out.push(format!("exception: {}", p["exceptionDetails"])),
            "Runtime.consoleAPICalled" if p["type"] == "error" || p["type"] == "warning" => {
                out.push(format!("console {}: {}", p["type"], p["args"]))
            }
            "Log.entryAdded"
                if p["entry"]["level"] == "error" || p["entry"]["level"] == "warning" =>
            {
                out.push(format!("log: {}", p["entry"]["text"]))
            }
            "Page.javascriptDialogOpening" => {
                out.push(format!("a script opened a dialog: {}", p["message"]))
            }
            "Network.requestWillBeSent" => {
                let url = p["request"]["url"].as_str().unwrap_or("");
                if url != page && !url.starts_with("data:") {
                    out.push(format!("network request: {url}"));
                }
            }
            _ => {}
        }
    }
    out
}

fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots")
}

fn write_report(job: &Path, out: &Path) -> PathBuf {
    let a = common::analyze(job);
    let input = ncclpm::report::ReportInput {
        job: &a.job,
        timeline: &a.timeline,
        diagnosis: &a.diagnosis,
    };
    ncclpm::report::write_reports(out, &input, false)
        .unwrap()
        .html
        .unwrap()
}

#[test]
fn every_sample_report_renders_without_errors_or_network() {
    let Some(exe) = chromium() else { return };
    let mut browser = Browser::launch(&exe);
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    let mut names: Vec<String> = std::fs::read_dir(&samples)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let tmp = tempfile::tempdir().unwrap();
    for name in names {
        let html = write_report(&samples.join(&name), &tmp.path().join(&name));
        let shot = screenshots().join(format!("{name}.png"));
        let found = open_report(&mut browser, &html, &shot);
        assert!(found.is_empty(), "{name}: {found:#?}");
        assert!(
            std::fs::metadata(&shot).unwrap().len() > 10_000,
            "{name}: the screenshot is blank"
        );
    }
}

#[test]
fn hostile_log_text_runs_no_script() {
    let Some(exe) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let hostile = [
        "<script>alert(1)</script>",
        "\"><img src=x onerror=alert(2)>",
        "</textarea><svg onload=alert(3)>",
        "<a href=\"javascript:alert(4)\">x</a>",
        "</script><script>alert(5)</script>",
    ];
    let mut log = String::new();
    for (i, h) in hostile.iter().enumerate() {
        log.push_str(&format!(
            "node1:10:11 [0] misc/socket.cc:{i} NCCL WARN socketProgress: Connection closed by remote peer node2<1234> {h}\n"
        ));
        log.push_str(&format!("[rank{i}]:[E ProcessGroupNCCL.cpp:1] [Rank {i}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType={h}, Timeout(ms)=1) ran for 2 milliseconds before timing out.\n"));
    }
    std::fs::write(job.join("nccl.log"), log).unwrap();
    let html = write_report(&job, &tmp.path().join("out"));
    let mut browser = Browser::launch(&exe);
    let found = open_report(&mut browser, &html, &screenshots().join("hostile.png"));
    assert!(found.is_empty(), "{found:#?}");
}
