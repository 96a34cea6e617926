//! The one validation error of the domain model: what is wrong, and with which field.

use std::fmt;

/// A value the model refuses: the field it came from (dotted, as the partner sent it:
/// `settings.rules.humans`) and a message a partner can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Invalid {
    /// The field, dotted (`ip`, `subdomain`, `settings.loadbalancer.certs_issuer`).
    pub field: String,
    /// What is wrong, in a sentence that names the value when that helps.
    pub message: String,
    /// Which kind of problem, so the API can choose its status code.
    pub kind: InvalidKind,
}

/// What kind of problem a value has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidKind {
    /// A required field is missing, or a value has the wrong type or form.
    Malformed,
    /// A well-formed value the model does not accept (an unknown settings key, a
    /// policy that does not exist, a private key that does not match).
    Unacceptable,
    /// Too many items, or an item too long.
    TooLarge,
}

impl Invalid {
    /// A malformed value of `field`.
    pub fn malformed(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid {
            field: field.into(),
            message: message.into(),
            kind: InvalidKind::Malformed,
        }
    }

    /// A well-formed but unacceptable value of `field`.
    pub fn unacceptable(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid {
            field: field.into(),
            message: message.into(),
            kind: InvalidKind::Unacceptable,
        }
    }

    /// A value of `field` over a limit.
    pub fn too_large(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid {
            field: field.into(),
            message: message.into(),
            kind: InvalidKind::TooLarge,
        }
    }

    /// A missing required field.
    pub fn missing(field: &str) -> Self {
        Invalid::malformed(field, format!("`{field}` is required"))
    }

    /// The same problem, reported for `field` (used when a value is checked before
    /// it is known where it came from, or at an index of a list).
    pub fn at(mut self, field: impl Into<String>) -> Self {
        self.field = field.into();
        self
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}
