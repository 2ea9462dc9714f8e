//! `trawl flows --tunnel inner` keeps the outer tunnel in each record (issue 23): type, outer
//! endpoints and id, of the initiator's first packet, as tshark decodes them
//! (`testdata/tunnels/*.tshark.txt`); the default mode's records have no tunnel fields.
use serde_json::Value;

use super::{testdata, trawl};

fn records(capture: &str, tunnel: &str) -> Vec<Value> {
    let out = trawl(&[
        "flows",
        "-r",
        &testdata(capture),
        "--tunnel",
        tunnel,
        "--summary",
        "none",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn inner_records_name_the_initiators_outer_tunnel() {
    // Geneve: the SSH client 30.0.0.2 sends through 20.0.0.2 -> 20.0.0.1 with VNI 11, the
    // server answers through the reverse with VNI 10 (tshark, geneve.pcap frames 10 and 11).
    let all = records("pcaps/geneve.pcap", "inner");
    let ssh: Vec<&Value> = all.iter().filter(|r| r["dst_port"] == 22).collect();
    assert_eq!(ssh.len(), 1, "{all:?}");
    let r = ssh[0];
    assert_eq!(
        (
            &r["src_ip"],
            &r["tunnel_type"],
            &r["tunnel_src"],
            &r["tunnel_dst"],
            &r["tunnel_id"]
        ),
        (
            &Value::from("30.0.0.2"),
            &Value::from("geneve"),
            &Value::from("20.0.0.2"),
            &Value::from("20.0.0.1"),
            &Value::from(11)
        )
    );
    // ERSPAN II mirroring VXLAN: the outermost tunnel is the record's.
    let all = records("pcaps/gre-erspan-vxlan.pcap", "inner");
    assert_eq!(all.len(), 1, "{all:?}");
    let r = &all[0];
    assert_eq!(
        (&r["src_ip"], &r["dst_port"]),
        (&Value::from("10.16.27.12"), &Value::from(80))
    );
    assert_eq!(
        (
            &r["tunnel_type"],
            &r["tunnel_src"],
            &r["tunnel_dst"],
            &r["tunnel_id"]
        ),
        (
            &Value::from("erspan"),
            &Value::from("100.20.9.2"),
            &Value::from("100.20.9.1"),
            &Value::from(20)
        )
    );
}

#[test]
fn aruba_gre_gives_the_inner_tcp_conversation() {
    // 802.11 frames in Aruba's GRE: one TCP connection inside (tshark: flows.py, 26 packets).
    let all = records("pcaps/aruba-gre-80211http.pcap", "inner");
    let tcp: Vec<&Value> = all.iter().filter(|r| r["proto"] == "tcp").collect();
    assert_eq!(tcp.len(), 1, "{all:?}");
    assert_eq!(
        (&tcp[0]["src_ip"], &tcp[0]["dst_port"]),
        (&Value::from("172.5.5.113"), &Value::from(80))
    );
    assert_eq!(tcp[0]["tunnel_type"], "gre");
    assert_eq!(tcp[0]["tunnel_src"], "10.10.0.2");
}

#[test]
fn outer_records_have_no_tunnel_fields_and_untunnelled_ones_are_null() {
    for r in records("pcaps/geneve.pcap", "outer") {
        assert!(r.get("tunnel_type").is_none(), "{r}");
    }
    // In inner mode a flow that came through no tunnel has them, null.
    let all = records("pcaps/erspan-type-i-4.pcap", "inner");
    let plain: Vec<&Value> = all.iter().filter(|r| r["src_ip"] == "30.1.1.1").collect();
    assert!(!plain.is_empty(), "{all:?}");
    for r in plain {
        assert!(
            r["tunnel_type"].is_null() && r["tunnel_id"].is_null(),
            "{r}"
        );
    }
}
