//! Attack payloads in the decoded path and query, probes for leaked files, and the
//! same checks once more after a second decoding (double encoding).
//!
//! One Aho-Corasick automaton (built once per instance) finds every needle in the
//! lower-case text; each needle has a cheap context check so ordinary words do not
//! fire (`union` must be followed by `select`, `or` must start a tautology such as
//! `' or '1'='1`, `../` must start a path segment, `javascript:` must carry code...).

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};
use percent_encoding::percent_decode_str;
use std::sync::OnceLock;

/// The kinds of attack the classifier names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    SqlInjection,
    Xss,
    PathTraversal,
    CommandInjection,
    Log4Shell,
    Shellshock,
    PhpObjectInjection,
    TemplateInjection,
    StreamWrapper,
    Ssrf,
    NullByte,
    VcsProbe,
    SecretFileProbe,
    DebugEndpointProbe,
    BackupFileProbe,
}

impl Kind {
    /// The reason id.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Kind::SqlInjection => "classifier.sql-injection",
            Kind::Xss => "classifier.xss",
            Kind::PathTraversal => "classifier.path-traversal",
            Kind::CommandInjection => "classifier.command-injection",
            Kind::Log4Shell => "classifier.log4shell",
            Kind::Shellshock => "classifier.shellshock",
            Kind::PhpObjectInjection => "classifier.php-object-injection",
            Kind::TemplateInjection => "classifier.template-injection",
            Kind::StreamWrapper => "classifier.stream-wrapper",
            Kind::Ssrf => "classifier.ssrf-metadata",
            Kind::NullByte => "classifier.null-byte",
            Kind::VcsProbe => "classifier.vcs-probe",
            Kind::SecretFileProbe => "classifier.secret-file-probe",
            Kind::DebugEndpointProbe => "classifier.debug-endpoint-probe",
            Kind::BackupFileProbe => "classifier.backup-file-probe",
        }
    }

    /// The confidence: 95 for payloads that only attacks carry, 90 for the rest.
    fn confidence(self) -> u8 {
        match self {
            Kind::SqlInjection
            | Kind::PathTraversal
            | Kind::CommandInjection
            | Kind::Log4Shell
            | Kind::Shellshock
            | Kind::PhpObjectInjection
            | Kind::StreamWrapper => 95,
            _ => 90,
        }
    }

    /// A finding of this kind in the text as received.
    pub(crate) fn finding(self) -> Finding {
        Finding {
            kind: self,
            double_encoded: false,
        }
    }
}

/// An attack found in a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) kind: Kind,
    /// Found only after a second decoding: an evasion attempt, so more certain.
    double_encoded: bool,
}

impl Finding {
    /// The opinion: security issues, with the kind's reason.
    pub(crate) fn opinion(self) -> Option<Opinion> {
        let confidence = if self.double_encoded {
            95
        } else {
            self.kind.confidence()
        };
        opinion(Category::SecurityIssues, confidence, self.kind.reason())
    }
}

/// The context check a needle hit must pass.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// The needle alone is proof.
    Always,
    /// `union` [`all`|`distinct`] `select`, separated by spaces, `+`, `(` or comments.
    UnionSelect,
    /// `or`/`and` as a word starting a tautology (`1=1`, `'a'='a`) in a SQL context.
    Tautology,
    /// `sleep(` with a number: `sleep(5)`.
    SleepCall,
    /// `benchmark(` with a count: `benchmark(10000000,`.
    BenchmarkCall,
    /// `'--` closing a value: `admin'--`.
    QuoteComment,
    /// After `;`, `'` or `)`: `'; drop table`.
    AfterTerminator,
    /// `<script` as a tag.
    ScriptTag,
    /// `javascript:` or `vbscript:` carrying code (not `void(0)`).
    ScriptScheme,
    /// An `on...` handler assigned after markup or a quote.
    EventHandler,
    /// `<iframe`, `<object`, `<embed` as tags.
    TagOpen,
    /// `<svg` followed by attributes.
    SvgOpen,
    /// `alert(1)`, `prompt(document.domain)`...
    CallArgument,
    /// `../` or `..\` starting a segment; in a query only twice or with a target.
    DotDot,
    /// A path ending in `/..`.
    DotDotEnd,
    /// `etc/passwd` after `/`, `\` or `=`.
    SystemFile,
    /// `win.ini`, `system32`, `cmd.exe` after `/`, `\`, `=` or a space.
    WindowsFile,
    /// `;`, `|`, `&&` or a new line followed by a shell command.
    Separator,
    /// `$(` or a backtick around a shell command.
    SubShell,
    /// `{{7*7}}` or `{{config.`, `{{self.`, `{{''.`...
    DoubleBrace,
    /// `${7*7}`, `#{7*7}`.
    Arithmetic,
    /// `/.git` as a directory or a git file.
    GitDir,
    /// The needle is a whole segment: the path ends or a `/` follows.
    DirOrEnd,
    /// `/.env`, `/.env.local`, `/.env~`...
    EnvFile,
    /// `id_rsa` as a file name (`/id_rsa`, `/id_rsa.pub`).
    KeyFile,
    /// `/wp-config.` with anything but `php` after it (copies and backups).
    WpConfig,
    /// `/actuator` endpoints other than `health` and `info`.
    Actuator,
}

/// Where a needle counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// Path and query.
    Anywhere,
    /// Path only (file probes).
    Path,
}

use Check as C;
use Kind as K;
use Scope::{Anywhere as A, Path as P};

/// Needles (lower case), what they indicate, their check and scope.
const RULES: &[(&str, Kind, Check, Scope)] = &[
    // SQL injection.
    ("union", K::SqlInjection, C::UnionSelect, A),
    ("or", K::SqlInjection, C::Tautology, A),
    ("and", K::SqlInjection, C::Tautology, A),
    ("sleep(", K::SqlInjection, C::SleepCall, A),
    ("benchmark(", K::SqlInjection, C::BenchmarkCall, A),
    ("information_schema.", K::SqlInjection, C::Always, A),
    ("from information_schema", K::SqlInjection, C::Always, A),
    ("load_file(", K::SqlInjection, C::Always, A),
    ("xp_cmdshell", K::SqlInjection, C::Always, A),
    ("into outfile", K::SqlInjection, C::Always, A),
    ("into dumpfile", K::SqlInjection, C::Always, A),
    ("@@version", K::SqlInjection, C::Always, A),
    ("extractvalue(", K::SqlInjection, C::Always, A),
    ("updatexml(", K::SqlInjection, C::Always, A),
    ("waitfor delay", K::SqlInjection, C::Always, A),
    ("concat(0x", K::SqlInjection, C::Always, A),
    ("'--", K::SqlInjection, C::QuoteComment, A),
    ("drop table", K::SqlInjection, C::AfterTerminator, A),
    ("drop database", K::SqlInjection, C::AfterTerminator, A),
    // Cross-site scripting.
    ("<script", K::Xss, C::ScriptTag, A),
    ("javascript:", K::Xss, C::ScriptScheme, A),
    ("vbscript:", K::Xss, C::ScriptScheme, A),
    ("<svg", K::Xss, C::SvgOpen, A),
    ("<iframe", K::Xss, C::TagOpen, A),
    ("<object", K::Xss, C::TagOpen, A),
    ("<embed", K::Xss, C::TagOpen, A),
    ("alert(", K::Xss, C::CallArgument, A),
    ("prompt(", K::Xss, C::CallArgument, A),
    ("confirm(", K::Xss, C::CallArgument, A),
    ("data:text/html", K::Xss, C::Always, A),
    ("document.cookie", K::Xss, C::Always, A),
    ("onerror", K::Xss, C::EventHandler, A),
    ("onload", K::Xss, C::EventHandler, A),
    ("onloadstart", K::Xss, C::EventHandler, A),
    ("onmouseover", K::Xss, C::EventHandler, A),
    ("onmouseenter", K::Xss, C::EventHandler, A),
    ("onfocus", K::Xss, C::EventHandler, A),
    ("onblur", K::Xss, C::EventHandler, A),
    ("onclick", K::Xss, C::EventHandler, A),
    ("ondblclick", K::Xss, C::EventHandler, A),
    ("onauxclick", K::Xss, C::EventHandler, A),
    ("ontoggle", K::Xss, C::EventHandler, A),
    ("onanimationstart", K::Xss, C::EventHandler, A),
    ("ontransitionend", K::Xss, C::EventHandler, A),
    ("onpointerover", K::Xss, C::EventHandler, A),
    ("onbegin", K::Xss, C::EventHandler, A),
    ("onwheel", K::Xss, C::EventHandler, A),
    ("onpageshow", K::Xss, C::EventHandler, A),
    ("oninput", K::Xss, C::EventHandler, A),
    ("onchange", K::Xss, C::EventHandler, A),
    ("onsubmit", K::Xss, C::EventHandler, A),
    ("onkeydown", K::Xss, C::EventHandler, A),
    ("onkeyup", K::Xss, C::EventHandler, A),
    ("onresize", K::Xss, C::EventHandler, A),
    ("onscroll", K::Xss, C::EventHandler, A),
    ("onhashchange", K::Xss, C::EventHandler, A),
    ("onmessage", K::Xss, C::EventHandler, A),
    // Path traversal and system files.
    ("../", K::PathTraversal, C::DotDot, A),
    ("..\\", K::PathTraversal, C::DotDot, A),
    ("/..", K::PathTraversal, C::DotDotEnd, P),
    ("etc/passwd", K::PathTraversal, C::SystemFile, A),
    ("etc/shadow", K::PathTraversal, C::SystemFile, A),
    ("proc/self/", K::PathTraversal, C::SystemFile, A),
    ("win.ini", K::PathTraversal, C::WindowsFile, A),
    ("boot.ini", K::PathTraversal, C::WindowsFile, A),
    ("system32", K::PathTraversal, C::WindowsFile, A),
    ("c:\\windows", K::PathTraversal, C::Always, A),
    ("c:/windows", K::PathTraversal, C::Always, A),
    // Command injection.
    (";", K::CommandInjection, C::Separator, A),
    ("|", K::CommandInjection, C::Separator, A),
    ("&&", K::CommandInjection, C::Separator, A),
    ("\n", K::CommandInjection, C::Separator, A),
    ("$(", K::CommandInjection, C::SubShell, A),
    ("`", K::CommandInjection, C::SubShell, A),
    ("cmd.exe", K::CommandInjection, C::WindowsFile, A),
    // Log4Shell (headers are checked in `headers`).
    ("${jndi:", K::Log4Shell, C::Always, A),
    ("${${", K::Log4Shell, C::Always, A),
    ("${lower:", K::Log4Shell, C::Always, A),
    ("${upper:", K::Log4Shell, C::Always, A),
    ("${env:", K::Log4Shell, C::Always, A),
    ("${sys:", K::Log4Shell, C::Always, A),
    ("${::-", K::Log4Shell, C::Always, A),
    // Server-side template injection.
    ("{{", K::TemplateInjection, C::DoubleBrace, A),
    ("${", K::TemplateInjection, C::Arithmetic, A),
    ("#{", K::TemplateInjection, C::Arithmetic, A),
    ("<%=", K::TemplateInjection, C::Always, A),
    ("__class__", K::TemplateInjection, C::Always, A),
    ("__globals__", K::TemplateInjection, C::Always, A),
    ("__subclasses__", K::TemplateInjection, C::Always, A),
    ("__builtins__", K::TemplateInjection, C::Always, A),
    ("__import__", K::TemplateInjection, C::Always, A),
    ("__mro__", K::TemplateInjection, C::Always, A),
    // Stream wrappers and dangerous URL schemes (file inclusion, SSRF).
    ("php://", K::StreamWrapper, C::Always, A),
    ("data://", K::StreamWrapper, C::Always, A),
    ("expect://", K::StreamWrapper, C::Always, A),
    ("phar://", K::StreamWrapper, C::Always, A),
    ("zip://", K::StreamWrapper, C::Always, A),
    ("file://", K::StreamWrapper, C::Always, A),
    ("gopher://", K::StreamWrapper, C::Always, A),
    ("dict://", K::StreamWrapper, C::Always, A),
    // Cloud metadata endpoints (SSRF).
    ("169.254.169.254", K::Ssrf, C::Always, A),
    ("metadata.google.internal", K::Ssrf, C::Always, A),
    ("100.100.100.200", K::Ssrf, C::Always, A),
    // Version-control directories.
    ("/.git", K::VcsProbe, C::GitDir, P),
    ("/.svn", K::VcsProbe, C::DirOrEnd, P),
    ("/.hg", K::VcsProbe, C::DirOrEnd, P),
    ("/.bzr", K::VcsProbe, C::DirOrEnd, P),
    ("/cvs/entries", K::VcsProbe, C::Always, P),
    // Secrets and server configuration.
    ("/.env", K::SecretFileProbe, C::EnvFile, P),
    ("/.aws", K::SecretFileProbe, C::DirOrEnd, P),
    ("/.ssh", K::SecretFileProbe, C::DirOrEnd, P),
    ("/.docker", K::SecretFileProbe, C::DirOrEnd, P),
    ("/.kube", K::SecretFileProbe, C::DirOrEnd, P),
    ("/.idea", K::SecretFileProbe, C::DirOrEnd, P),
    ("/.vscode/sftp.json", K::SecretFileProbe, C::Always, P),
    ("/sftp-config.json", K::SecretFileProbe, C::Always, P),
    ("/.htpasswd", K::SecretFileProbe, C::Always, P),
    ("/.htaccess", K::SecretFileProbe, C::Always, P),
    ("/.ds_store", K::SecretFileProbe, C::Always, P),
    ("/.npmrc", K::SecretFileProbe, C::Always, P),
    ("/.pypirc", K::SecretFileProbe, C::Always, P),
    ("/.netrc", K::SecretFileProbe, C::Always, P),
    ("/.pgpass", K::SecretFileProbe, C::Always, P),
    ("/.my.cnf", K::SecretFileProbe, C::Always, P),
    ("/.bash_history", K::SecretFileProbe, C::Always, P),
    ("/.zsh_history", K::SecretFileProbe, C::Always, P),
    ("/.mysql_history", K::SecretFileProbe, C::Always, P),
    ("/web-inf/", K::SecretFileProbe, C::Always, P),
    ("/meta-inf/", K::SecretFileProbe, C::Always, P),
    ("id_rsa", K::SecretFileProbe, C::KeyFile, P),
    ("id_dsa", K::SecretFileProbe, C::KeyFile, P),
    ("id_ecdsa", K::SecretFileProbe, C::KeyFile, P),
    ("id_ed25519", K::SecretFileProbe, C::KeyFile, P),
    ("/wp-config.", K::SecretFileProbe, C::WpConfig, P),
    // Debug and management endpoints.
    ("/phpinfo.php", K::DebugEndpointProbe, C::Always, P),
    ("/server-status", K::DebugEndpointProbe, C::DirOrEnd, P),
    ("/server-info", K::DebugEndpointProbe, C::DirOrEnd, P),
    ("/actuator", K::DebugEndpointProbe, C::Actuator, P),
    ("/vendor/phpunit/", K::DebugEndpointProbe, C::Always, P),
    ("/_ignition/", K::DebugEndpointProbe, C::Always, P),
    ("/debug/pprof", K::DebugEndpointProbe, C::DirOrEnd, P),
    ("/_profiler", K::DebugEndpointProbe, C::DirOrEnd, P),
    ("/jmx-console", K::DebugEndpointProbe, C::DirOrEnd, P),
    ("/manager/html", K::DebugEndpointProbe, C::DirOrEnd, P),
    (
        "/invoker/jmxinvokerservlet",
        K::DebugEndpointProbe,
        C::Always,
        P,
    ),
];

/// How a shell command after a separator must continue to count.
#[derive(Clone, Copy)]
enum Arity {
    /// Runs without arguments (`id`, `whoami`): the text ends or another separator follows.
    Bare,
    /// Takes any argument (`wget http://...`): a space and an argument follow.
    Any,
    /// Common words that only count with a path, option or number (`cat /etc`, `ls -la`).
    Option,
}

/// Shell commands attackers run.
const COMMANDS: &[(&[u8], Arity)] = &[
    (b"wget", Arity::Any),
    (b"curl", Arity::Any),
    (b"bash", Arity::Any),
    (b"sh", Arity::Any),
    (b"zsh", Arity::Any),
    (b"nc", Arity::Any),
    (b"ncat", Arity::Any),
    (b"netcat", Arity::Any),
    (b"busybox", Arity::Any),
    (b"tftp", Arity::Any),
    (b"telnet", Arity::Any),
    (b"nslookup", Arity::Any),
    (b"powershell", Arity::Any),
    (b"chmod", Arity::Any),
    (b"whoami", Arity::Bare),
    (b"id", Arity::Bare),
    (b"uname", Arity::Bare),
    (b"ifconfig", Arity::Bare),
    (b"ipconfig", Arity::Bare),
    (b"pwd", Arity::Bare),
    (b"hostname", Arity::Bare),
    (b"cat", Arity::Option),
    (b"ls", Arity::Option),
    (b"echo", Arity::Option),
    (b"rm", Arity::Option),
    (b"sleep", Arity::Option),
    (b"ping", Arity::Option),
    (b"python", Arity::Option),
    (b"python3", Arity::Option),
    (b"perl", Arity::Option),
    (b"php", Arity::Option),
    (b"cmd", Arity::Option),
];

/// Names a traversal in a query aims at.
const TRAVERSAL_TARGETS: &[&[u8]] = &[
    b"etc/",
    b"windows",
    b"win.ini",
    b"boot.ini",
    b"proc/",
    b".env",
    b"wp-config",
    b"passwd",
    b".htpasswd",
    b".ssh",
    b"web.config",
    b"web-inf",
];

/// Template expressions that reach into the engine (`{{config.items()}}`).
const TEMPLATE_OBJECTS: &[&[u8]] = &[
    b"config",
    b"self",
    b"request",
    b"lipsum",
    b"cycler",
    b"joiner",
    b"namespace",
    b"url_for",
    b"get_flashed_messages",
    b"range",
    b"constructor",
    b"''",
    b"\"\"",
    b"()",
    b"[]",
    b"_self",
];

/// Archive extensions checked on backup-like file names.
const ARCHIVES: &[&str] = &[
    ".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tar", ".zip", ".rar", ".7z", ".gz", ".bz2",
];

/// File-name stems of site backups (`backup.zip`, `www.tar.gz`...).
const BACKUP_STEMS: &[&str] = &[
    "backup",
    "backups",
    "bak",
    "site",
    "www",
    "wwwroot",
    "htdocs",
    "public_html",
    "web",
    "website",
    "db",
    "database",
    "dump",
    "sql",
    "config",
    "html",
    "root",
    "old",
    "src",
    "source",
    "wp-content",
];

/// Suffixes of database dumps, editor leftovers and backup copies.
const BACKUP_SUFFIXES: &[&str] = &[
    ".sql",
    ".sql.gz",
    ".sql.zip",
    ".sql.bz2",
    ".sql.xz",
    ".sql.7z",
    ".sql.tar.gz",
    ".bak",
    ".old",
    ".swp",
    ".swo",
    ".save",
    ".orig",
    ".backup",
];

/// The automaton over all [`RULES`] needles: a DFA, small for this few needles.
pub(crate) fn automaton() -> Option<&'static AhoCorasick> {
    static AUTOMATON: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    AUTOMATON
        .get_or_init(|| {
            AhoCorasick::builder()
                .kind(Some(AhoCorasickKind::DFA))
                .match_kind(MatchKind::Standard)
                .build(RULES.iter().map(|r| r.0))
                .ok()
        })
        .as_ref()
}

/// The first attack in the request's path or query, also after a second decoding.
pub(crate) fn inspect(req: &Request<'_>) -> Option<Finding> {
    let path = req.path_lower();
    let query = req.query_lower();
    if let Some(found) = scan(path, true, req.host()).or_else(|| scan(query, false, "")) {
        return Some(found);
    }
    for (text, in_path) in [(path, true), (query, false)] {
        if has_escape(text.as_bytes()) {
            let decoded = percent_decode_str(text).decode_utf8_lossy().to_lowercase();
            if let Some(found) = scan(&decoded, in_path, req.host()) {
                return Some(Finding {
                    double_encoded: true,
                    ..found
                });
            }
        }
    }
    None
}

/// Whether `text` still holds a `%XX` escape after the host's decoding.
fn has_escape(text: &[u8]) -> bool {
    memchr::memchr_iter(b'%', text).any(|at| {
        text.get(at + 1).is_some_and(u8::is_ascii_hexdigit)
            && text.get(at + 2).is_some_and(u8::is_ascii_hexdigit)
    })
}

/// The first attack in one lower-case text (`in_path`: it is the path).
fn scan(text: &str, in_path: bool, host: &str) -> Option<Finding> {
    if text.is_empty() {
        return None;
    }
    let bytes = text.as_bytes();
    if memchr::memchr(0, bytes).is_some() {
        return Some(Kind::NullByte.finding());
    }
    if let Some(automaton) = automaton() {
        for m in automaton.find_overlapping_iter(text) {
            let (_, kind, check, scope) = RULES[m.pattern().as_usize()];
            if (scope == Scope::Anywhere || in_path)
                && passes(check, bytes, m.start(), m.end(), in_path)
            {
                return Some(kind.finding());
            }
        }
    }
    (in_path && is_backup_probe(text, host)).then(|| Kind::BackupFileProbe.finding())
}

/// Whether a hit of a needle at `start..end` of `text` passes `check`.
fn passes(check: Check, text: &[u8], start: usize, end: usize, in_path: bool) -> bool {
    let before = start.checked_sub(1).map(|i| text[i]);
    let rest = &text[end..];
    let next = rest.first().copied();
    match check {
        Check::Always => true,
        Check::UnionSelect => {
            !before.is_some_and(|b| b.is_ascii_alphabetic()) && union_select(rest)
        }
        Check::Tautology => {
            !before.is_some_and(is_word)
                && !next.is_some_and(is_word)
                && tautology(text, start, rest)
        }
        Check::SleepCall => {
            !before.is_some_and(|b| b.is_ascii_alphabetic()) && number_call(rest, b')')
        }
        Check::BenchmarkCall => number_call(rest, b','),
        Check::QuoteComment => {
            before.is_some_and(|b| b.is_ascii_alphanumeric())
                && next.is_none_or(|b| b.is_ascii_whitespace() || b == b'&' || b == b'#')
        }
        Check::AfterTerminator => {
            let head = trim_end(&text[..start]);
            head.last().is_some_and(|b| b";')".contains(b))
        }
        Check::ScriptTag => next.is_none_or(|b| b.is_ascii_whitespace() || b == b'>' || b == b'/'),
        Check::ScriptScheme => {
            !before.is_some_and(|b| b.is_ascii_alphabetic()) && carries_code(rest)
        }
        Check::EventHandler => {
            before.is_some_and(|b| b.is_ascii_whitespace() || b"/'\"`;".contains(&b))
                && trim_start(rest).first() == Some(&b'=')
                && text[..start].iter().any(|b| b"<'\"".contains(b))
        }
        Check::TagOpen => next.is_none_or(|b| b.is_ascii_whitespace() || b == b'/' || b == b'>'),
        Check::SvgOpen => next.is_some_and(|b| b.is_ascii_whitespace() || b == b'/'),
        Check::CallArgument => {
            !before.is_some_and(is_word)
                && (next.is_some_and(|b| b.is_ascii_digit() || b"'\"`".contains(&b))
                    || [
                        &b"document"[..],
                        b"window",
                        b"origin",
                        b"string.fromcharcode",
                        b"atob(",
                    ]
                    .iter()
                    .any(|w| rest.starts_with(w)))
        }
        Check::DotDot => {
            before.is_none_or(|b| b.is_ascii_whitespace() || b"/\\=:'\"".contains(&b))
                && (in_path || query_traversal(text))
        }
        Check::DotDotEnd => rest.is_empty(),
        Check::SystemFile => before.is_none_or(|b| b"/\\=".contains(&b)),
        Check::WindowsFile => before.is_none_or(|b| b"/\\= ".contains(&b)),
        Check::Separator => shell_command(trim_start(rest), false),
        Check::SubShell => shell_command(trim_start(rest), true),
        Check::DoubleBrace => {
            let inner = trim_start(rest);
            arithmetic(inner, b"}}")
                || TEMPLATE_OBJECTS.iter().any(|o| {
                    inner.starts_with(o) && inner.get(o.len()).is_some_and(|b| b".[(|".contains(b))
                })
        }
        Check::Arithmetic => arithmetic(trim_start(rest), b"}"),
        Check::GitDir => {
            next.is_none_or(|b| b == b'/' || b == b'-')
                || [&b"config"[..], b"ignore", b"modules", b"attributes"]
                    .iter()
                    .any(|w| rest.starts_with(w))
        }
        Check::DirOrEnd => next.is_none_or(|b| b == b'/'),
        Check::EnvFile => next.is_none_or(|b| b"./~_-".contains(&b)),
        Check::KeyFile => {
            before.is_some_and(|b| b == b'/' || b == b'\\') && next.is_none_or(|b| b == b'.')
        }
        Check::WpConfig => rest != b"php",
        Check::Actuator => match rest {
            [] => true,
            [b'/', endpoint @ ..] => {
                !endpoint.starts_with(b"health") && !endpoint.starts_with(b"info")
            }
            _ => false,
        },
    }
}

/// Letters, digits and `_`.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// SQL accepts `+` (a space in a query) and white space between tokens.
fn is_sql_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == b'+'
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &s[n..]
}

fn trim_end(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_whitespace())
        .count();
    &s[..s.len() - n]
}

/// Skips SQL separators (spaces, `+`, `(`, `/*...*/` comments); `None` when a comment
/// does not close.
fn skip_sql_separators(s: &[u8]) -> Option<(usize, &[u8])> {
    let mut i = 0;
    loop {
        if s.get(i).is_some_and(|&b| is_sql_space(b) || b == b'(') {
            i += 1;
        } else if s[i..].starts_with(b"/*") {
            let close = memchr::memmem::find(&s[i + 2..], b"*/")?;
            i += close + 4;
        } else {
            return Some((i, &s[i..]));
        }
    }
}

/// `rest` (after `union`) continues with [`all`|`distinct`] `select`.
fn union_select(rest: &[u8]) -> bool {
    let Some((skipped, mut s)) = skip_sql_separators(rest) else {
        return false;
    };
    if skipped == 0 {
        return false;
    }
    for word in [&b"all"[..], b"distinct"] {
        if s.starts_with(word) {
            match skip_sql_separators(&s[word.len()..]) {
                Some((n, after)) if n > 0 => s = after,
                _ => return false,
            }
            break;
        }
    }
    s.starts_with(b"select") && !s.get(6).is_some_and(|b| b.is_ascii_alphabetic())
}

/// One side of a comparison: an optional quote and a word (empty when quoted).
fn operand(s: &[u8]) -> Option<(bool, &[u8], &[u8])> {
    let quote = s.first().copied().filter(|b| *b == b'\'' || *b == b'"');
    let body = if quote.is_some() { &s[1..] } else { s };
    let len = body.iter().take_while(|&&b| is_word(b)).count();
    if len == 0 && quote.is_none() {
        return None;
    }
    let mut rest = &body[len..];
    if let Some(q) = quote
        && rest.first() == Some(&q)
    {
        rest = &rest[1..];
    }
    Some((quote.is_some(), &body[..len], rest))
}

/// A tautology (`1=1`, `'a'='a`, `''='`) after `or`/`and` at `start`, in a SQL
/// context: a quote, `)` or number before the keyword, a quoted operand, or a comment
/// or `;` after the comparison.
fn tautology(text: &[u8], start: usize, rest: &[u8]) -> bool {
    let s = skip_sql_spaces(rest);
    let Some((quoted_a, a, s)) = operand(s) else {
        return false;
    };
    let s = skip_sql_spaces(s);
    let Some(s) = s.strip_prefix(b"=") else {
        return false;
    };
    let s = skip_sql_spaces(s);
    let Some((quoted_b, b, s)) = operand(s) else {
        return false;
    };
    if a != b || (a.is_empty() && !(quoted_a && quoted_b)) {
        return false;
    }
    let head = &text[..start];
    let head_len = head.len() - head.iter().rev().take_while(|&&b| is_sql_space(b)).count();
    let sql_before = head_len > 0 && {
        let b = head[head_len - 1];
        b == b'\'' || b == b'"' || b == b')' || b.is_ascii_digit()
    };
    let tail = skip_sql_spaces(s);
    let comment_after = tail.starts_with(b"--")
        || tail.starts_with(b"#")
        || tail.starts_with(b"/*")
        || tail.starts_with(b";");
    sql_before || quoted_a || comment_after
}

/// `rest` (after an opening parenthesis) is a number and then `close`: `5)`, `10000,`.
fn number_call(rest: &[u8], close: u8) -> bool {
    let s = trim_start(rest);
    let digits = s
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .count();
    digits > 0 && trim_start(&s[digits..]).first() == Some(&close)
}

/// What follows SQL spaces at the start of `s`.
fn skip_sql_spaces(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| is_sql_space(b)).count();
    &s[n..]
}

/// What follows a number (and spaces) at the start of `s`; `None` without a digit.
fn after_number(s: &[u8]) -> Option<&[u8]> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    (n > 0).then(|| trim_start(&s[n..]))
}

/// `s` is `7*7` then `close` (spaces allowed).
fn arithmetic(s: &[u8], close: &[u8]) -> bool {
    let Some(s) = after_number(s) else {
        return false;
    };
    let Some(s) = s.strip_prefix(b"*") else {
        return false;
    };
    after_number(trim_start(s)).is_some_and(|s| s.starts_with(close))
}

/// `rest` (after `javascript:`) carries code, not a no-op link (`void(0)`, `;`).
fn carries_code(rest: &[u8]) -> bool {
    let Some(&first) = rest.first() else {
        return false;
    };
    if first.is_ascii_whitespace()
        || [&b"void(0)"[..], b"void 0", b";"]
            .iter()
            .any(|w| rest.starts_with(w))
    {
        return false;
    }
    rest.starts_with(b"//")
        || rest[..rest.len().min(100)]
            .iter()
            .any(|b| b"(`=".contains(b))
}

/// `s` starts with a shell command used the way injections use it. `enclosed`: inside
/// `$(...)` or backticks, where the command may end at the closing mark.
fn shell_command(s: &[u8], enclosed: bool) -> bool {
    COMMANDS.iter().any(|&(word, arity)| {
        if !s.starts_with(word) {
            return false;
        }
        let after = &s[word.len()..];
        let Some(&follower) = after.first() else {
            return enclosed || matches!(arity, Arity::Bare);
        };
        if enclosed && b")`;|".contains(&follower) {
            return true;
        }
        let spaced = follower == b' ' || follower == b'\t';
        let argument = trim_start(after).first().copied();
        match arity {
            Arity::Bare => spaced || b";|&`#)".contains(&follower),
            Arity::Any => spaced && argument.is_some_and(|b| b != b'&'),
            Arity::Option => {
                spaced
                    && (enclosed
                        || argument.is_some_and(|b| b.is_ascii_digit() || b"/-$\\.".contains(&b)))
            }
        }
    })
}

/// A traversal in a query counts when it climbs twice or aims at a known target; one
/// `../` in a parameter can be an application's own relative link.
fn query_traversal(text: &[u8]) -> bool {
    let climbs = memchr::memmem::find_iter(text, b"../").count()
        + memchr::memmem::find_iter(text, b"..\\").count();
    climbs >= 2
        || TRAVERSAL_TARGETS
            .iter()
            .any(|t| memchr::memmem::find(text, t).is_some())
}

/// Whether the path's file name is a database dump, an editor or backup copy, or an
/// archive named like a site backup (or like the website's host name).
fn is_backup_probe(path: &str, host: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or("");
    // Every suffix below, and the `~` rule, needs a dot in the name.
    if name.len() < 2 || memchr::memchr(b'.', name.as_bytes()).is_none() {
        return false;
    }
    if BACKUP_SUFFIXES
        .iter()
        .any(|s| name.ends_with(s) && name.len() > s.len())
    {
        return true;
    }
    // `index.php~`, `.env~`: an editor's backup copy.
    if name.ends_with('~') && !name.starts_with('~') && name.contains('.') {
        return true;
    }
    let Some(stem) = ARCHIVES.iter().find_map(|ext| name.strip_suffix(ext)) else {
        return false;
    };
    let site = host.strip_prefix("www.").unwrap_or(host);
    let label = site.split('.').next().unwrap_or("");
    BACKUP_STEMS.contains(&stem)
        || (!host.is_empty()
            && (stem == host || stem == site || (label.len() > 2 && stem == label)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_query(q: &str) -> Option<Kind> {
        scan(q, false, "").map(|f| f.kind)
    }

    #[test]
    fn every_rule_needle_is_lower_case_and_unique() {
        for (i, (needle, ..)) in RULES.iter().enumerate() {
            assert_eq!(*needle, needle.to_lowercase(), "{needle}");
            assert!(
                !RULES[..i].iter().any(|r| r.0 == *needle),
                "duplicate {needle}"
            );
        }
    }

    #[test]
    fn tautologies_need_a_sql_context() {
        assert_eq!(scan_query("id=1' or '1'='1"), Some(Kind::SqlInjection));
        assert_eq!(scan_query("id=1 or 1=1--"), Some(Kind::SqlInjection));
        assert_eq!(scan_query("user=x' or ''='"), Some(Kind::SqlInjection));
        assert_eq!(scan_query("q=black or white"), None);
        assert_eq!(scan_query("q=this or that=that"), None);
    }

    #[test]
    fn union_select_allows_comments_and_all() {
        assert_eq!(
            scan_query("id=1 union/**/all/**/select 1,2"),
            Some(Kind::SqlInjection)
        );
        assert_eq!(
            scan_query("id=-1 union(select 1)"),
            Some(Kind::SqlInjection)
        );
        assert_eq!(scan_query("q=trade union selection"), None);
    }

    #[test]
    fn shell_commands_need_injection_shape() {
        assert_eq!(scan_query("host=1.1.1.1;id"), Some(Kind::CommandInjection));
        assert_eq!(
            scan_query("f=a|cat /etc/hosts"),
            Some(Kind::CommandInjection)
        );
        assert_eq!(scan_query("tags=dog|cat"), None);
        assert_eq!(scan_query("q=tom;cats"), None);
    }

    #[test]
    fn backup_names_follow_the_host() {
        assert!(is_backup_probe("/example.zip", "www.example.com"));
        assert!(is_backup_probe(
            "/www.example.com.tar.gz",
            "www.example.com"
        ));
        assert!(!is_backup_probe(
            "/downloads/app-1.2.tar.gz",
            "www.example.com"
        ));
        assert!(!is_backup_probe("/~alice", "www.example.com"));
    }
}
