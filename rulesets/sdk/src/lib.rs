//! The SDK for botgate rule components: bindings to the WIT contract, request helpers,
//! opinion builders, the export macro and a native test kit.
//!
//! A rule component is a type implementing [`Ruleset`], exported with
//! [`export_ruleset!`]. Its logic is plain Rust over [`Request`], so it is unit-tested
//! natively with [`testing`]; only the export shim is compiled for `wasm32-wasip2`.
//!
//! ```ignore
//! use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};
//!
//! pub struct MyCms;
//! impl Ruleset for MyCms {
//!     fn info() -> Info { botgate_ruleset_sdk::info!("mycms", "Recognises MyCMS login brute force.") }
//!     fn evaluate(req: &Request) -> Option<Opinion> {
//!         if req.is_method("POST") && req.path_lower() == "/login" && req.behaviour().requests > 30 {
//!             return opinion(Category::SecurityIssues, 80, "mycms.login-brute-force");
//!         }
//!         None
//!     }
//! }
//! botgate_ruleset_sdk::export_ruleset!(MyCms);
//! ```

pub mod allocator;
pub mod request;
pub mod signals;
pub mod testing;
pub mod ua;

/// Bindings generated from the one WIT source, `wit/ruleset.wit` at the repository root.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "ruleset",
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "botgate_ruleset_sdk::bindings",
    });
}

/// The allocator [`export_ruleset!`] installs: freed small blocks kept by size class
/// ([`allocator::Cached`]) over talc's allocator for single-threaded WebAssembly.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[doc(hidden)]
pub mod __allocator {
    /// The type of the installed allocator.
    pub type Installed = crate::allocator::Cached<talc::wasm::WasmDynamicTalc>;

    /// The installed allocator, with nothing allocated yet.
    pub const fn new() -> Installed {
        crate::allocator::Cached::new(talc::wasm::new_wasm_dynamic_allocator())
    }
}

pub use bindings::botgate::ruleset::types::{
    AlpnProtocol, Behaviour, Category, ChallengePass, ComponentInfo as Info, CrawlerVerification,
    HttpVersion, IpAddress, Opinion, RequestFacts, Scheme, TlsFacts, TlsVersion,
};
pub use request::Request;

/// A rule component's logic.
pub trait Ruleset {
    /// The requests this rule set has opinions on: lower-case markers, each a substring
    /// of [`Request::path_lower`] or [`Request::query_lower`] of every request it may
    /// answer (`"/wp-"`, `"author="`), or, written `ua:…`, of the lower-cased user agent
    /// (`"ua:wordpress/"`). Outside the scope the gateway does not call the component
    /// at all; the test kit ([`judge`]) answers as the gateway would and fails a test
    /// in which [`Ruleset::evaluate`] has an opinion outside the scope, so a scope that
    /// is too narrow shows up in the rule set's own tests. Empty (the default) holds
    /// every request; at most 64 markers of 1 to 64 bytes.
    const SCOPE: &'static [&'static str] = &[];
    /// Name, version and description; the name must equal the `.wasm` file's stem. The
    /// export shim fills in the scope from [`Ruleset::SCOPE`].
    fn info() -> Info;
    /// The opinion on one request, or `None` to abstain.
    fn evaluate(req: &Request<'_>) -> Option<Opinion>;
}

/// The rule set's answer as the gateway sees it: [`Ruleset::evaluate`] inside
/// [`Ruleset::SCOPE`], abstention outside (the gateway does not call it there). The
/// test kit answers with this; the export shim calls `evaluate` directly, since the
/// gateway has checked the scope before the call.
pub fn judge<R: Ruleset>(req: &Request<'_>) -> Option<Opinion> {
    if in_scope(R::SCOPE, req) {
        R::evaluate(req)
    } else {
        None
    }
}

/// Whether `req` is inside `scope`, read exactly as the host reads it: under the path
/// as sent, or under a servlet container's reading of it (`;` parameters dropped).
pub fn in_scope(scope: &[&str], req: &Request<'_>) -> bool {
    if scope.is_empty() {
        return true;
    }
    // Some marker, or some part of a compound marker, reads the user agent.
    let needs_ua = scope
        .iter()
        .any(|m| m.contains(botgate_normalise::USER_AGENT_MARKER));
    let user_agent = if needs_ua {
        req.user_agent().to_ascii_lowercase()
    } else {
        String::new()
    };
    let view = botgate_normalise::ScopeView {
        method: req.method(),
        path: req.path_lower(),
        query: req.query_lower(),
        user_agent: &user_agent,
    };
    if botgate_normalise::in_scope(scope, &view) {
        return true;
    }
    let (path, _) = botgate_normalise::split_target(&req.facts().target);
    botgate_normalise::without_parameters(path).is_some_and(|servlet| {
        let path = botgate_normalise::path(&servlet);
        botgate_normalise::in_scope(
            scope,
            &botgate_normalise::ScopeView {
                path: &path,
                ..view
            },
        )
    })
}

/// [`Ruleset::info`] with the scope filled in from [`Ruleset::SCOPE`].
pub fn info_of<R: Ruleset>() -> Info {
    let mut info = R::info();
    info.scope = R::SCOPE.iter().map(|m| (*m).to_owned()).collect();
    info
}

/// Builds `Some(Opinion)`; the usual return value of [`Ruleset::evaluate`].
///
/// `reason` is a stable id such as `wordpress.xmlrpc-multicall` (`[a-z0-9.-]`, at
/// most 64 bytes); the host drops opinions with another shape.
pub fn opinion(category: Category, confidence: u8, reason: &str) -> Option<Opinion> {
    debug_assert!(
        is_valid_reason(reason),
        "reason id `{reason}` must be [a-z0-9.-], at most 64 bytes"
    );
    Some(Opinion {
        category,
        confidence: confidence.min(100),
        reason: reason.to_owned(),
    })
}

/// Whether `reason` is a well-formed reason id: 1 to 64 bytes of `[a-z0-9.-]`.
pub fn is_valid_reason(reason: &str) -> bool {
    !reason.is_empty()
        && reason.len() <= 64
        && reason
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}

/// Builds the [`Info`] of a component: its name, the crate's version and a description.
#[macro_export]
macro_rules! info {
    ($name:expr, $description:expr) => {
        $crate::Info {
            name: ::std::string::String::from($name),
            version: ::std::string::String::from(env!("CARGO_PKG_VERSION")),
            description: ::std::string::String::from($description),
            scope: ::std::vec::Vec::new(),
        }
    };
}

/// Exports a [`Ruleset`] implementation as the component's `rules` interface, and
/// installs the component's allocator: each call allocates the request's strings (the
/// host's `cabi_realloc`), frees them and allocates the opinion's reason, which talc
/// does in fewer instructions than the standard library's dlmalloc, and a block freed
/// by one call serves the next call's request of its size class without reaching talc
/// ([`allocator::Cached`]; benches/README.md).
/// A component with a `#[global_allocator]` of its own exports with
/// `export_ruleset!(MyCms, own_allocator)`.
///
/// The shim exists only when compiling for `wasm32`; natively the crate is plain Rust.
#[macro_export]
macro_rules! export_ruleset {
    ($ty:ty) => {
        $crate::export_ruleset!($ty, own_allocator);
        #[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
        #[global_allocator]
        static __BOTGATE_ALLOCATOR: $crate::__allocator::Installed = $crate::__allocator::new();
    };
    ($ty:ty, own_allocator) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct BotgateExport;
            impl $crate::bindings::exports::botgate::ruleset::rules::Guest for BotgateExport {
                fn info() -> $crate::Info {
                    $crate::info_of::<$ty>()
                }
                fn evaluate(facts: $crate::RequestFacts) -> Option<$crate::Opinion> {
                    <$ty as $crate::Ruleset>::evaluate(&$crate::Request::new(&facts))
                }
            }
    $crate::bindings::export_bindings!(BotgateExport with_types_in $crate::bindings);
        };
    };
}
