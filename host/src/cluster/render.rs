//! One server's files from a cluster description: redis.conf, sentinel.conf,
//! haproxy.cfg, the failover script and its settings, the systemd units and drop-ins,
//! the sysctl file and botgate's own configuration, each with the owner and mode its
//! service needs (a secret is readable by the services that use it, and no other).

use super::{Description, Provider, Secrets, Server};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The failover script Sentinel runs (`client-reconfig-script`).
pub const FAILOVER_SCRIPT: &str = include_str!("../../../deploy/fip-switch.sh");

/// What a rendered file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    RedisConfig,
    SentinelConfig,
    HaproxyConfig,
    FailoverScript,
    FailoverSettings,
    ProviderToken,
    /// The store's password, for the failover script's questions to its sentinel.
    StorePassword,
    GatewayConfig,
    SystemdUnit,
    SystemdDropIn,
    Sysctl,
}

/// A file to install on the server.
#[derive(Debug, Clone)]
pub struct RenderedFile {
    pub kind: FileKind,
    /// Where it goes on the server (absolute).
    pub path: PathBuf,
    pub owner: &'static str,
    pub group: &'static str,
    pub mode: u32,
    pub contents: String,
}

impl RenderedFile {
    /// Whether the store's own state lives in the file after the first start: Sentinel
    /// rewrites sentinel.conf, and redis.conf's `replicaof` after a failover, so a
    /// second installation must not put the rendered ones back.
    pub fn holds_store_state(&self) -> bool {
        matches!(self.kind, FileKind::RedisConfig | FileKind::SentinelConfig)
    }
}

/// Why a server's files could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("no server is named `{0}` in the description")]
    UnknownServer(String),
    #[error("[gateway] `{key}`: {problem}")]
    Gateway { key: String, problem: String },
}

/// The files of server `name`.
pub fn render(
    description: &Description,
    secrets: &Secrets,
    name: &str,
) -> Result<Vec<RenderedFile>, RenderError> {
    let (index, server) = description
        .server(name)
        .ok_or_else(|| RenderError::UnknownServer(name.to_owned()))?;
    let paths = &description.paths;
    let config = &paths.botgate_config;
    let file = |kind, path: PathBuf, owner, group, mode, contents| RenderedFile {
        kind,
        path,
        owner,
        group,
        mode,
        contents,
    };
    let systemd = |unit: &str| paths.systemd.join(unit);
    Ok(vec![
        file(
            FileKind::RedisConfig,
            paths.redis_config.join("redis.conf"),
            "redis",
            "redis",
            0o640,
            redis_conf(description, secrets, index, server),
        ),
        file(
            FileKind::SentinelConfig,
            paths.redis_config.join("sentinel.conf"),
            "redis",
            "redis",
            0o640,
            sentinel_conf(description, secrets, server),
        ),
        file(
            FileKind::HaproxyConfig,
            paths.haproxy_config.join("haproxy.cfg"),
            "root",
            "haproxy",
            0o640,
            haproxy_cfg(description, secrets, server),
        ),
        file(
            FileKind::FailoverScript,
            paths.failover_script.clone(),
            "root",
            "root",
            0o755,
            FAILOVER_SCRIPT.to_owned(),
        ),
        file(
            FileKind::FailoverSettings,
            config.join("fip-switch.conf"),
            "root",
            "redis",
            0o640,
            failover_settings(description, server),
        ),
        file(
            FileKind::ProviderToken,
            config.join("provider-token"),
            "root",
            "redis",
            0o640,
            format!("{}\n", secrets.provider_token),
        ),
        file(
            FileKind::StorePassword,
            config.join("store-password"),
            "root",
            "redis",
            0o640,
            format!("{}\n", secrets.redis_password),
        ),
        file(
            FileKind::GatewayConfig,
            config.join("botgate.toml"),
            "root",
            "botgate",
            0o640,
            gateway_config(description, secrets, server)?,
        ),
        file(
            FileKind::SystemdUnit,
            systemd("botgate.service"),
            "root",
            "root",
            0o644,
            botgate_unit(description),
        ),
        file(
            FileKind::SystemdDropIn,
            systemd("redis-server.service.d/botgate-cluster.conf"),
            "root",
            "root",
            0o644,
            hardening(&[
                &paths.redis_data,
                &paths.redis_logs,
                &paths.redis_run,
                &paths.redis_config,
            ]),
        ),
        file(
            FileKind::SystemdDropIn,
            systemd("redis-sentinel.service.d/botgate-cluster.conf"),
            "root",
            "root",
            0o644,
            format!(
                "{}# Debian's unit may execute nothing but redis-sentinel: the failover script\n\
                 # and the programs it runs (sh, curl, jq, redis-cli) are allowed here.\n\
                 ExecPaths={} /usr/bin /bin\n",
                hardening(&[
                    &paths.redis_data,
                    &paths.redis_logs,
                    &paths.sentinel_run,
                    &paths.redis_config,
                ]),
                paths.failover_script.display()
            ),
        ),
        file(
            FileKind::SystemdDropIn,
            systemd("haproxy.service.d/botgate-cluster.conf"),
            "root",
            "root",
            0o644,
            // Debian's unit writes /run/haproxy.pid and /run/haproxy-master.sock.
            hardening(&[Path::new("/run"), Path::new("/var/lib/haproxy")]),
        ),
        file(
            FileKind::Sysctl,
            paths.sysctl.join(SYSCTL_FILE),
            "root",
            "root",
            0o644,
            "# Rendered by `botgate cluster render`: services may bind the floating IP\n\
             # (and any address) before it is assigned to this server.\n\
             net.ipv4.ip_nonlocal_bind = 1\nnet.ipv6.ip_nonlocal_bind = 1\n"
                .to_owned(),
        ),
    ])
}

fn header(server: &Server, what: &str) -> String {
    format!(
        "# {what} of server `{}`, rendered by `botgate cluster render`.\n",
        server.name
    )
}

/// What a store service binds: the private IP and `local` (loopback), or the private
/// IP alone when it is a loopback address itself (several servers on one machine).
fn bind(server: &Server, local: &str) -> String {
    match server.private_ip.is_loopback() {
        true => server.private_ip.to_string(),
        false => format!("{} {local}", server.private_ip),
    }
}

/// An address as a host in `host:port` (IPv6 in brackets).
fn host_port(ip: std::net::IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}

fn redis_conf(d: &Description, secrets: &Secrets, index: usize, server: &Server) -> String {
    let p = &d.paths;
    let mut conf = header(server, "The store node (redis-server)");
    let _ = write!(
        conf,
        "bind {bind}\n\
         protected-mode yes\n\
         port {port}\n\
         requirepass {password}\n\
         # Any node may be a replica after a failover.\n\
         masterauth {password}\n\
         replica-announce-ip {private}\n\
         appendonly yes\n\
         dir {data}\n\
         logfile {logs}/redis-server.log\n\
         pidfile {run}/redis-server.pid\n\
         daemonize no\n\
         supervised systemd\n\
         # A master that cannot reach a replica within 10 s stops taking writes: a master\n\
         # cut off from the others (whose replica Sentinel promotes meanwhile) does not\n\
         # accept writes that the failover would throw away. The cost: with every replica\n\
         # down, the store refuses writes until one is back.\n\
         min-replicas-to-write 1\n\
         min-replicas-max-lag 10\n",
        bind = bind(server, "127.0.0.1 -::1"),
        private = server.private_ip,
        port = d.ports.redis,
        password = secrets.redis_password,
        data = p.redis_data.display(),
        logs = p.redis_logs.display(),
        run = p.redis_run.display(),
    );
    if index > 0 {
        let master = d.initial_master();
        let _ = writeln!(conf, "replicaof {} {}", master.private_ip, d.ports.redis);
    }
    conf
}

fn sentinel_conf(d: &Description, secrets: &Secrets, server: &Server) -> String {
    let p = &d.paths;
    let master = d.initial_master();
    let mut conf = header(server, "The failover coordinator (redis-sentinel)");
    let _ = write!(
        conf,
        "# Sentinel rewrites this file as it learns the cluster: install it once.\n\
         port {port}\n\
         # Reached by the other sentinels on the private network, and locally; never on\n\
         # the public address. It takes commands with the store's password only, and\n\
         # gives it to the other sentinels.\n\
         bind {bind}\n\
         requirepass {password}\n\
         sentinel sentinel-pass {password}\n\
         sentinel announce-ip {private}\n\
         daemonize no\n\
         supervised systemd\n\
         loglevel notice\n\
         logfile {logs}/redis-sentinel.log\n\
         pidfile {run}/redis-sentinel.pid\n\
         dir {data}\n\
         sentinel monitor mymaster {master} {redis} 2\n\
         sentinel auth-pass mymaster {password}\n\
         sentinel down-after-milliseconds mymaster {down_after}\n\
         sentinel failover-timeout mymaster {failover_timeout}\n\
         sentinel parallel-syncs mymaster 1\n\
         sentinel client-reconfig-script mymaster {script}\n\
         sentinel deny-scripts-reconfig yes\n",
        port = d.ports.sentinel,
        bind = bind(server, "127.0.0.1"),
        private = server.private_ip,
        logs = p.redis_logs.display(),
        run = p.sentinel_run.display(),
        data = p.redis_data.display(),
        master = master.private_ip,
        redis = d.ports.redis,
        password = secrets.redis_password,
        down_after = d.timers.down_after_ms,
        failover_timeout = d.timers.failover_timeout_ms,
        script = p.failover_script.display(),
    );
    conf
}

fn haproxy_cfg(d: &Description, secrets: &Secrets, server: &Server) -> String {
    let ports = &d.ports;
    let inter = d.timers.store_check_ms;
    let mut conf = header(server, "The TCP proxy (haproxy)");
    let _ = write!(
        conf,
        "global\n\
         \x20   maxconn {maxconn}\n\
         \x20   user haproxy\n\
         \x20   group haproxy\n\
         \n\
         defaults\n\
         \x20   mode tcp\n\
         \x20   maxconn {maxconn}\n\
         \x20   retries 2\n\
         \x20   timeout connect 5000\n\
         \x20   timeout client 50000\n\
         \x20   timeout server 50000\n\
         \n\
         # The store: whichever node is the master.\n\
         frontend store\n\
         \x20   bind *:{store}\n\
         \x20   default_backend store_master\n\
         \n\
         backend store_master\n\
         \x20   # The change feed's connection is quiet between changes: cut after 50 s of\n\
         \x20   # silence, every gateway would read all websites again each time.\n\
         \x20   timeout tunnel 1h\n\
         \x20   option tcp-check\n\
         \x20   tcp-check connect\n\
         \x20   tcp-check send AUTH\\ {password}\\r\\n\n\
         \x20   tcp-check expect string +OK\n\
         \x20   tcp-check send PING\\r\\n\n\
         \x20   tcp-check expect string +PONG\n\
         \x20   tcp-check send info\\ replication\\r\\n\n\
         \x20   tcp-check expect string role:master\n\
         \x20   # The guard: a master with no replica connected is not the cluster's master.\n\
         \x20   # An old master restarted after a failover says `role:master` until Sentinel\n\
         \x20   # turns it into a replica, with no replica of its own; it gets no traffic.\n\
         \x20   tcp-check expect rstring connected_slaves:[1-9]\n\
         \x20   tcp-check send QUIT\\r\\n\n\
         \x20   tcp-check expect string +OK\n",
        maxconn = d.haproxy_maxconn,
        store = ports.store_proxy,
        password = secrets.redis_password,
    );
    for node in &d.servers {
        let _ = writeln!(
            conf,
            "    server {} {} check inter {inter}ms maxconn 4096 on-marked-down shutdown-sessions",
            node.name,
            host_port(node.private_ip, ports.redis),
        );
    }
    let _ = write!(
        conf,
        "\n\
         # The websites and the API, to this server's gateway on loopback.\n\
         frontend http\n\
         \x20   bind *:{http}\n\
         \x20   default_backend gateway_http\n\
         \n\
         backend gateway_http\n\
         \x20   server gateway 127.0.0.1:{gateway_http} send-proxy-v2 check check-send-proxy\n\
         \n\
         frontend https\n\
         \x20   bind *:{https}\n\
         \x20   default_backend gateway_https\n\
         \n\
         backend gateway_https\n\
         \x20   server gateway 127.0.0.1:{gateway_https} send-proxy-v2-ssl check check-send-proxy check-ssl verify none\n",
        http = ports.http,
        https = ports.https,
        gateway_http = ports.gateway_http,
        gateway_https = ports.gateway_https,
    );
    conf
}

fn failover_settings(d: &Description, server: &Server) -> String {
    let mut conf = header(server, "The failover script's settings (fip-switch.sh)");
    let token = d.paths.botgate_config.join("provider-token");
    let _ = writeln!(conf, "floating_ip={}", d.floating_ip);
    let _ = writeln!(conf, "sentinel_port={}", d.ports.sentinel);
    let _ = writeln!(
        conf,
        "sentinel_password_file={}",
        d.paths.botgate_config.join("store-password").display()
    );
    let _ = writeln!(conf, "token_file={}", token.display());
    let _ = writeln!(
        conf,
        "log_file={}",
        d.paths.redis_logs.join("fip-switch.log").display()
    );
    match &d.provider {
        Provider::Hetzner {
            floating_ip_id,
            api,
            ..
        } => {
            let _ = writeln!(
                conf,
                "provider=hetzner\napi={api}\nfloating_ip_id={floating_ip_id}"
            );
        }
        Provider::Digitalocean { api, .. } => {
            let _ = writeln!(conf, "provider=digitalocean\napi={api}");
        }
        Provider::Vultr {
            reserved_ip_id,
            api,
            ..
        } => {
            let _ = writeln!(
                conf,
                "provider=vultr\napi={api}\nfloating_ip_id={reserved_ip_id}"
            );
        }
        Provider::Generic {
            url,
            body,
            method,
            assignment_url,
            assignment_field,
            ..
        } => {
            let _ = writeln!(
                conf,
                "provider=generic\nurl={url}\nbody={body}\nmethod={method}"
            );
            // With them the script reads the assignment first, as for the others.
            if let (Some(read), Some(field)) = (assignment_url, assignment_field) {
                let _ = writeln!(conf, "read_url={read}\nread_field={field}");
            }
        }
    }
    for node in &d.servers {
        let _ = writeln!(conf, "instance {} {}", node.private_ip, node.instance_id);
    }
    conf
}

fn gateway_config(
    d: &Description,
    secrets: &Secrets,
    server: &Server,
) -> Result<String, RenderError> {
    let ports = &d.ports;
    let mut document = toml_edit::DocumentMut::new();
    let store = format!("redis://{}", host_port(d.floating_ip, ports.store_proxy));
    document["redis-url"] = toml_edit::value(store);
    document["redis-password"] = toml_edit::value(secrets.redis_password.clone());
    document["redis-wait-replicas"] = toml_edit::value(1);
    document["http-listen"] = toml_edit::value(format!("127.0.0.1:{}", ports.gateway_http));
    document["https-listen"] = toml_edit::value(format!("127.0.0.1:{}", ports.gateway_https));
    document["admin-listen"] = toml_edit::value(format!("127.0.0.1:{}", ports.gateway_admin));
    // Health and metrics for the other servers (`botgate cluster check`, Prometheus);
    // the operator's commands stay on loopback.
    let mut metrics = toml_edit::Array::new();
    metrics.push(host_port(server.private_ip, ports.gateway_admin));
    document["metrics-listen"] = toml_edit::value(metrics);
    let mut trusted = toml_edit::Array::new();
    trusted.push("127.0.0.1/32");
    trusted.push("::1/128");
    document["trusted-proxy"] = toml_edit::value(trusted);
    document["data-dir"] = toml_edit::value(d.paths.botgate_data.display().to_string());
    document["rulesets-dir"] =
        toml_edit::value(d.paths.botgate_data.join("rulesets").display().to_string());
    for (key, value) in &d.gateway {
        let value = value_of(value).ok_or_else(|| RenderError::Gateway {
            key: key.clone(),
            problem: "must be a string, a number, a boolean or an array of them".into(),
        })?;
        document[key.as_str()] = toml_edit::Item::Value(value);
    }
    let mut text = format!("{}{}", header(server, "botgate's configuration"), document);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// A `toml` value as a `toml_edit` one (no tables: options are not grouped).
fn value_of(value: &toml::Value) -> Option<toml_edit::Value> {
    Some(match value {
        toml::Value::String(s) => s.as_str().into(),
        toml::Value::Integer(i) => (*i).into(),
        toml::Value::Float(f) => (*f).into(),
        toml::Value::Boolean(b) => (*b).into(),
        toml::Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(value_of(item)?);
            }
            toml_edit::Value::Array(array)
        }
        toml::Value::Datetime(_) | toml::Value::Table(_) => return None,
    })
}

fn botgate_unit(d: &Description) -> String {
    let p = &d.paths;
    let binary = p.botgate_binary.display();
    let config = p.botgate_config.join("botgate.toml");
    let config = config.display();
    format!(
        "# botgate, rendered by `botgate cluster render`.\n\
         [Unit]\n\
         Description=botgate bot-protection gateway\n\
         Wants=network-online.target\n\
         After=network-online.target haproxy.service\n\
         \n\
         [Service]\n\
         Type=exec\n\
         User=botgate\n\
         Group=botgate\n\
         WorkingDirectory={data}\n\
         Environment=BOTGATE_CACHE_DIR={cache}\n\
         ExecStartPre={binary} config check {config}\n\
         ExecStart={binary} serve --config {config}\n\
         # The file is checked first; a reload that the gateway refuses changes nothing.\n\
         ExecReload={binary} config check {config}\n\
         ExecReload=/bin/kill -HUP $MAINPID\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         LimitNOFILE=65536\n\
         NoNewPrivileges=yes\n\
         PrivateTmp=yes\n\
         ProtectHome=yes\n\
         ProtectSystem=strict\n\
         ReadWritePaths={data} {logs} {cache}\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        data = p.botgate_data.display(),
        logs = p.botgate_logs.display(),
        cache = p.botgate_cache.display(),
    )
}

/// A drop-in that confines a Debian service: home directories out of reach, the file
/// system read-only but for `writable` (a `-` prefix: missing is no error).
fn hardening(writable: &[&Path]) -> String {
    let mut paths = String::new();
    for path in writable {
        let _ = write!(paths, " -{}", path.display());
    }
    format!(
        "# Rendered by `botgate cluster render`.\n\
         [Service]\n\
         ProtectHome=yes\n\
         ProtectSystem=strict\n\
         ReadWritePaths={}\n",
        paths.trim_start()
    )
}

/// The sysctl file's name under `paths.sysctl`.
const SYSCTL_FILE: &str = "60-botgate-nonlocal-bind.conf";

/// `install.sh`: puts `files` (rendered under its own folder) in place with their
/// owners and modes. The store's files (Sentinel's state) are installed only the first
/// time, or with `--reset-store`.
pub fn install_script(description: &Description, server: &str, files: &[RenderedFile]) -> String {
    let marker = description.paths.redis_config.join(".botgate-cluster");
    let mut script = format!(
        "#!/bin/sh\n\
         # Installs the files `botgate cluster render` wrote for server `{server}`. Run as\n\
         # root from anywhere, after `apt-get install redis-server redis-sentinel haproxy curl jq`.\n\
         # redis.conf and sentinel.conf are installed the first time only (Sentinel rewrites\n\
         # them as the cluster fails over); `--reset-store` installs them again.\n\
         set -eu\n\
         here=$(cd \"$(dirname \"$0\")\" && pwd)\n\
         reset=no\n\
         [ \"${{1:-}}\" = --reset-store ] && reset=yes\n\
         id botgate >/dev/null 2>&1 || useradd --system --home-dir {data} --shell /usr/sbin/nologin botgate\n\
         install -d -o botgate -g botgate -m 0750 {data} {data}/rulesets {logs} {cache}\n\
         marker={marker}\n",
        marker = marker.display(),
        data = description.paths.botgate_data.display(),
        logs = description.paths.botgate_logs.display(),
        cache = description.paths.botgate_cache.display(),
    );
    for file in files {
        let target = file.path.display();
        let source = format!("$here{}", file.path.display());
        let install = format!(
            "install -D -o {} -g {} -m {:04o} \"{source}\" \"{target}\"",
            file.owner, file.group, file.mode
        );
        if file.holds_store_state() {
            let _ = writeln!(
                script,
                "if [ $reset = yes ] || [ ! -e $marker ]; then {install}; \
                 else echo \"kept {target} (Sentinel's; --reset-store replaces it)\"; fi"
            );
        } else {
            let _ = writeln!(script, "{install}");
        }
    }
    let sysctl = description.paths.sysctl.join(SYSCTL_FILE);
    let _ = write!(
        script,
        "touch $marker\n\
         if [ -d /run/systemd/system ]; then\n\
         \x20   sysctl -p {sysctl} >/dev/null\n\
         \x20   systemctl daemon-reload\n\
         else\n\
         \x20   echo \"systemd is not running: apply {sysctl} and reload systemd once it is\"\n\
         fi\n\
         echo \"installed; check with: haproxy -c -f {haproxy} && botgate config check {config}\"\n",
        sysctl = sysctl.display(),
        haproxy = description
            .paths
            .haproxy_config
            .join("haproxy.cfg")
            .display(),
        config = description
            .paths
            .botgate_config
            .join("botgate.toml")
            .display(),
    );
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description() -> (Description, Secrets) {
        let text = super::super::tests::THREE;
        let description = Description::parse(text, Path::new("c.toml")).unwrap();
        let secrets = Secrets {
            redis_password: "0123456789abcdef0123".into(),
            provider_token: "do-token-0123456789".into(),
        };
        (description, secrets)
    }

    fn contents(files: &[RenderedFile], kind: FileKind) -> &str {
        &files.iter().find(|f| f.kind == kind).unwrap().contents
    }

    #[test]
    fn the_master_and_a_replica_differ_only_where_they_should() {
        let (d, s) = description();
        let first = render(&d, &s, "gw1").unwrap();
        let second = render(&d, &s, "gw2").unwrap();
        let redis1 = contents(&first, FileKind::RedisConfig);
        let redis2 = contents(&second, FileKind::RedisConfig);
        assert!(!redis1.contains("replicaof"));
        assert!(redis2.contains("replicaof 10.0.0.11 6379\n"));
        assert!(redis2.contains("bind 10.0.0.12 127.0.0.1"));
        for line in [
            "appendonly yes",
            "min-replicas-to-write 1",
            "min-replicas-max-lag 10",
        ] {
            assert!(redis1.contains(line) && redis2.contains(line), "{line}");
        }
        let sentinel = contents(&second, FileKind::SentinelConfig);
        assert!(sentinel.contains("sentinel monitor mymaster 10.0.0.11 6379 2\n"));
        assert!(
            sentinel.contains(
                "sentinel client-reconfig-script mymaster /usr/local/bin/fip-switch.sh\n"
            )
        );
        let haproxy = contents(&second, FileKind::HaproxyConfig);
        assert!(haproxy.contains("server gw1 10.0.0.11:6379 check inter 3000ms maxconn 4096"));
        assert!(haproxy.contains("bind *:16379"));
        let gateway = contents(&second, FileKind::GatewayConfig);
        assert!(
            gateway.contains("redis-url = \"redis://203.0.113.100:16379\""),
            "{gateway}"
        );
        assert!(gateway.contains("redis-wait-replicas = 1"));
        assert!(gateway.contains("admin-listen = \"127.0.0.1:9180\""));
        assert!(
            gateway.contains("metrics-listen = [\"10.0.0.12:9180\"]"),
            "{gateway}"
        );
        assert!(gateway.contains("api-host = [\"api.example.net\"]"));
        assert!(haproxy.contains("timeout tunnel 1h"));
        let sentinel_unit = second
            .iter()
            .find(|f| {
                f.path
                    .ends_with("redis-sentinel.service.d/botgate-cluster.conf")
            })
            .unwrap();
        assert!(
            sentinel_unit
                .contents
                .contains("ExecPaths=/usr/local/bin/fip-switch.sh /usr/bin /bin")
        );
        let install = install_script(&d, "gw2", &second);
        assert!(install.contains("install -d -o botgate -g botgate -m 0750 /var/lib/botgate"));
        let settings = contents(&second, FileKind::FailoverSettings);
        assert!(settings.contains("instance 10.0.0.12 1002\n"));
        assert!(
            settings.contains("provider=hetzner\n") && settings.contains("floating_ip_id=4711\n")
        );
    }

    #[test]
    fn secrets_go_only_into_files_their_services_read() {
        let (d, s) = description();
        for file in render(&d, &s, "gw1").unwrap() {
            let has_secret = file.contents.contains(&s.redis_password)
                || file.contents.contains(&s.provider_token);
            if has_secret {
                assert_eq!(
                    file.mode & 0o007,
                    0,
                    "{} is readable by others",
                    file.path.display()
                );
                assert_ne!(file.group, "root", "{}", file.path.display());
            }
        }
        assert!(matches!(
            render(&d, &s, "gw9"),
            Err(RenderError::UnknownServer(name)) if name == "gw9"
        ));
    }
}
