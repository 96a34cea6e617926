//! The rendered system files checked by the programs that read them on a server, with a
//! real cluster's addresses and ports: the systemd units and drop-ins by `systemd-analyze
//! verify` (the drop-ins over Debian's own units), and, in a network namespace of the
//! test's own, the sysctl file applied by `sysctl -p` and the store node and Sentinel
//! started on their rendered files, binds included.

use super::LoopbackCluster;
use std::path::Path;
use std::process::Command;

/// `systemd-analyze verify UNIT.service` with `units` first on systemd's unit path:
/// whether it passed, and what it said.
fn verify(units: &Path, unit: &str) -> (bool, String) {
    let output = Command::new("systemd-analyze")
        .args(["verify", &format!("{unit}.service")])
        .env("SYSTEMD_UNIT_PATH", format!("{}:", units.display()))
        .output()
        .expect("systemd-analyze (Debian's systemd package) runs");
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), said)
}

#[test]
fn systemd_accepts_the_rendered_units_and_drop_ins() {
    let cluster = LoopbackCluster::with_production_addresses(3).unwrap();
    cluster.render_and_install(2).unwrap();
    // The unit starts botgate where the description's `[paths]` put it.
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_botgate"),
        cluster.file(2, "usr/local/bin/botgate"),
    )
    .unwrap();
    let units = cluster.file(2, "etc/systemd/system");
    for unit in ["botgate", "redis-server", "redis-sentinel", "haproxy"] {
        let (passed, said) = verify(&units, unit);
        assert!(passed && said.trim().is_empty(), "{unit}.service: {said}");
    }

    // The drop-ins are read: one systemd cannot parse is named.
    let broken = tempfile::tempdir().unwrap();
    let drop_ins = broken.path().join("redis-sentinel.service.d");
    std::fs::create_dir(&drop_ins).unwrap();
    let rendered =
        std::fs::read_to_string(units.join("redis-sentinel.service.d/botgate-cluster.conf"))
            .unwrap();
    std::fs::write(
        drop_ins.join("botgate-cluster.conf"),
        format!("{rendered}ProtectSystem=sometimes\n"),
    )
    .unwrap();
    let (_, said) = verify(broken.path(), "redis-sentinel");
    assert!(
        said.contains("botgate-cluster.conf") && said.contains("sometimes"),
        "{said}"
    );
}

/// Run in a network namespace of its own: loopback up, no other address. Without the
/// sysctl the store node cannot bind the private IP the machine lacks; with it, the
/// node and Sentinel start before the address arrives and answer on it once it does.
const IN_A_NETWORK_NAMESPACE: &str = r#"
redis_conf=$1 sentinel_conf=$2 sysctl_file=$3 password=$4 private_ip=$5 public_ip=$6
pids=
trap 'kill $pids 2>/dev/null; wait' EXIT
ping() {
    if [ -n "${3:-}" ]; then
        redis-cli -h "$1" -p "$2" -a "$3" --no-auth-warning PING 2>&1 | head -n 1
    else
        redis-cli -h "$1" -p "$2" PING 2>&1 | head -n 1
    fi
}
wait_for() {
    i=0
    until [ "$(ping 127.0.0.1 "$@")" = PONG ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
}
ip link set lo up
echo "nonlocal before: $(sysctl -n net.ipv4.ip_nonlocal_bind) $(sysctl -n net.ipv6.ip_nonlocal_bind)"
timeout 5 redis-server "$redis_conf" >/dev/null 2>&1
echo "redis-server before: exit $?"
sysctl -q -p "$sysctl_file" || echo "sysctl -p failed"
echo "nonlocal after: $(sysctl -n net.ipv4.ip_nonlocal_bind) $(sysctl -n net.ipv6.ip_nonlocal_bind)"
redis-server "$redis_conf" >/dev/null 2>&1 &
pids="$pids $!"
redis-sentinel "$sentinel_conf" >/dev/null 2>&1 &
pids="$pids $!"
wait_for 6379 "$password"
wait_for 26379 "$password"
ip addr add "$private_ip/32" dev lo
ip addr add "$public_ip/32" dev lo
for address in "$private_ip" 127.0.0.1 ::1 "$public_ip"; do
    echo "redis-server $address: $(ping "$address" 6379 "$password")"
    echo "redis-sentinel $address: $(ping "$address" 26379 "$password")"
done
"#;

#[test]
fn the_store_node_and_sentinel_bind_as_rendered_once_the_sysctl_is_applied() {
    let cluster = LoopbackCluster::with_production_addresses(3).unwrap();
    cluster.render_and_install(2).unwrap();
    let (private, public) = (cluster.private_ip(2), cluster.public_ip(2));
    let redis_conf = cluster.file(2, "etc/redis/redis.conf");
    let rendered = std::fs::read_to_string(&redis_conf).unwrap();
    assert!(
        rendered.contains(&format!("bind {private} 127.0.0.1 -::1\n")),
        "{rendered}"
    );
    let output = Command::new("timeout")
        .args([
            "60",
            "unshare",
            "--net",
            "sh",
            "-c",
            IN_A_NETWORK_NAMESPACE,
            "sh",
        ])
        .arg(&redis_conf)
        .arg(cluster.file(2, "etc/redis/sentinel.conf"))
        .arg(cluster.file(2, "etc/sysctl.d/60-botgate-nonlocal-bind.conf"))
        .arg(&cluster.password)
        .args([private.to_string(), public.to_string()])
        .output()
        .expect("unshare runs");
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    let logs = || {
        ["redis-server", "redis-sentinel"]
            .map(|name| {
                let log = cluster.file(2, &format!("var/log/redis/{name}.log"));
                format!(
                    "{name}:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            })
            .join("\n")
    };
    assert!(output.status.success(), "{said}\n{}", logs());
    let wanted = [
        "nonlocal before: 0 0".to_owned(),
        "redis-server before: exit 1".to_owned(),
        "nonlocal after: 1 1".to_owned(),
        format!("redis-server {private}: PONG"),
        "redis-server 127.0.0.1: PONG".to_owned(),
        "redis-server ::1: PONG".to_owned(),
        format!("redis-sentinel {private}: PONG"),
        "redis-sentinel 127.0.0.1: PONG".to_owned(),
    ];
    for line in &wanted {
        assert!(
            said.lines().any(|l| l == line),
            "{line:?} not in:\n{said}\n{}",
            logs()
        );
    }
    // Never on the public address; Sentinel not on ::1 either.
    for refused in [
        format!("redis-server {public}: "),
        format!("redis-sentinel {public}: "),
        "redis-sentinel ::1: ".to_owned(),
    ] {
        let line = said.lines().find(|l| l.starts_with(&refused)).unwrap();
        assert!(line.contains("Connection refused"), "{line}\n{said}");
    }
}
