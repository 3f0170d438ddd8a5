//! `sluice top`: one `GET /top` to a sluice's admin listener (plain HTTP/1.1, as the
//! listener serves it), its JSON printed as it came or as a table, heaviest first, with the
//! window it covers and how far its counts may be off.

use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::ClientError;
use crate::settings::TopArgs;

/// `/top`'s answer: the JSON text, for printing as it is or as a table.
#[derive(Debug)]
pub struct TopReport {
    pub json: String,
}

/// Ask `admin` for the heavy hitters `args` describe.
pub async fn top(admin: SocketAddr, args: &TopArgs) -> Result<TopReport, ClientError> {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("domain", &args.domain)
        .append_pair("n", &args.n.to_string())
        .append_pair("by", args.by.name())
        .finish();
    let path = format!("/top?{query}");
    let (status, body) = tokio::time::timeout(args.timeout, get(admin, &path))
        .await
        .map_err(|_| ClientError::Connect {
            addr: admin.to_string(),
            message: format!("no answer within {:?}", args.timeout),
        })??;
    if status != 200 {
        // The admin listener says why in `{"error": …}`.
        let why = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or(body);
        return Err(ClientError::Http {
            status,
            message: why,
        });
    }
    Ok(TopReport { json: body })
}

async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), ClientError> {
    let failed = |e: &dyn std::fmt::Display| ClientError::Connect {
        addr: addr.to_string(),
        message: e.to_string(),
    };
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| failed(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| failed(&e))?;
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .map_err(|e| failed(&e))?;
    let response = sender.send_request(request).await.map_err(|e| failed(&e))?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| failed(&e))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

impl TopReport {
    /// The answer as the admin listener gave it, on one line.
    pub fn json(&self) -> String {
        format!("{}\n", self.json.trim_end())
    }

    /// One line per descriptor (rule, entries, hits, denials), then the reading's window and
    /// error bounds.
    pub fn table(&self) -> String {
        let v: Value = serde_json::from_str(&self.json).unwrap_or(Value::Null);
        let num = |v: &Value| v.as_u64().unwrap_or(0);
        let mut rows = vec![[
            "RULE".to_owned(),
            "DESCRIPTOR".into(),
            "HITS".into(),
            "DENIED".into(),
        ]];
        for e in v["top"].as_array().into_iter().flatten() {
            let entries: Vec<String> = e["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|kv| {
                    format!(
                        "{}={}",
                        kv["key"].as_str().unwrap_or_default(),
                        kv["value"].as_str().unwrap_or_default()
                    )
                })
                .chain(
                    e["more_entries"]
                        .as_bool()
                        .unwrap_or(false)
                        .then(|| "…".into()),
                )
                .collect();
            rows.push([
                e["rule"].as_str().unwrap_or_default().to_owned(),
                entries.join(","),
                num(&e["hits"]).to_string(),
                num(&e["denied"]).to_string(),
            ]);
        }
        let widths: Vec<usize> = (0..4)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in &rows {
            let line = format!(
                "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}",
                r[0],
                r[1],
                r[2],
                r[3],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3]
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let (eh, ed) = (num(&v["error"]["hits"]), num(&v["error"]["denied"]));
        let error = if eh == 0 && ed == 0 {
            "counts exact".to_owned()
        } else {
            format!("counts within {eh} hits and {ed} denials")
        };
        out.push_str(&format!(
            "domain {} by {}: the last {}s (window {}s): {} hits, {} denied; {error}\n",
            v["domain"].as_str().unwrap_or_default(),
            v["by"].as_str().unwrap_or_default(),
            num(&v["covered_s"]),
            num(&v["window_s"]),
            num(&v["hits"]),
            num(&v["denied"]),
        ));
        out
    }
}
