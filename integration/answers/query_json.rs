//! `sluice query --json` prints every field of the response, the dynamic metadata (with the
//! decision) and the rule's body included: whatever `/json` answers for the same request,
//! it prints too.

use std::process::Command;

use serde_json::Value;

use super::*;

const DENYING: &str = r#"
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1}
    response: {raw_body: "slow down"}
"#;

#[tokio::test]
async fn query_json_prints_what_json_answers() {
    let s = in_process()
        .file("d.yaml", DENYING)
        .args(["--decision-metadata"])
        .start()
        .await;
    let query = || {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "query",
                "--addr",
                &s.grpc.to_string(),
                "--domain",
                "d",
                "-d",
                "k=v",
                "--json",
            ])
            .output()
            .expect("sluice query");
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON")
    };
    query();
    let printed = query();
    let (code, body) = s
        .http_post("/json", r#"{"domain":"d","hitsAddend":1,"descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#)
        .await;
    assert_eq!(code, 429);
    let answered: Value = serde_json::from_str(&body).expect("JSON");
    let fields = answered.as_object().expect("an object");
    assert!(
        fields.contains_key("dynamicMetadata") && fields.contains_key("rawBody"),
        "{answered}"
    );
    for (field, value) in fields {
        if field == "statuses" {
            // /json leaves out defaults (proto3 JSON); query prints them.
            assert_eq!(printed[field][0]["code"], value[0]["code"]);
            continue;
        }
        assert_eq!(&printed[field], value, "{field}: query printed {printed}");
    }
    assert_eq!(printed["dynamicMetadata"]["decidingRule"], "d.k");
    assert_eq!(printed["quota"], Value::Null, "every field is present");
}
