//! An error and its sources on one line (`outer: inner: cause`), for log fields: typed
//! errors keep each layer's context in its own `Display` and the cause in `source()`.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its sources.
pub struct Report<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("connecting to the origin")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_layer_is_shown_once() {
        let err = Outer(std::io::Error::other("refused"));
        assert_eq!(
            Report(&err).to_string(),
            "connecting to the origin: refused"
        );
    }
}
