//! The dashboard's languages: one catalogue of strings per language
//! (`i18n/<tag>.json`, a flat object of key → text), compiled in. A key missing from a
//! catalogue falls back to English; the tests keep every catalogue complete.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A language the dashboard speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    En,
    Ru,
}

/// One language's strings.
#[derive(Debug)]
pub struct Strings {
    texts: BTreeMap<String, String>,
    /// The catalogue as JSON that is safe inside a `<script type="application/json">`.
    script_json: String,
}

fn load(source: &str) -> Strings {
    let texts: BTreeMap<String, String> = serde_json::from_str(source).unwrap_or_default();
    let script_json = serde_json::to_string(&texts)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    Strings { texts, script_json }
}

impl Language {
    pub const ALL: [Language; 2] = [Language::En, Language::Ru];

    /// The language of a URL's `{lang}`: English unless it names another we speak.
    pub fn from_tag(tag: &str) -> Language {
        Language::ALL
            .into_iter()
            .find(|language| language.tag().eq_ignore_ascii_case(tag))
            .unwrap_or(Language::En)
    }

    pub fn tag(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Ru => "ru",
        }
    }

    /// The language's own name.
    pub fn name(self) -> &'static str {
        match self {
            Language::En => "English",
            Language::Ru => "Русский",
        }
    }

    /// The catalogue's source.
    pub fn source(self) -> &'static str {
        match self {
            Language::En => include_str!("../i18n/en.json"),
            Language::Ru => include_str!("../i18n/ru.json"),
        }
    }

    pub fn strings(self) -> &'static Strings {
        static EN: OnceLock<Strings> = OnceLock::new();
        static RU: OnceLock<Strings> = OnceLock::new();
        match self {
            Language::En => EN.get_or_init(|| load(Language::En.source())),
            Language::Ru => RU.get_or_init(|| load(Language::Ru.source())),
        }
    }
}

impl Strings {
    /// The text of `key`: this language's, else English, else the key itself.
    pub fn get<'a>(&'a self, key: &'a str) -> &'a str {
        self.texts
            .get(key)
            .or_else(|| Language::En.strings().texts.get(key))
            .map_or(key, String::as_str)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.texts.keys().map(String::as_str)
    }

    pub fn script_json(&self) -> &str {
        &self.script_json
    }
}
