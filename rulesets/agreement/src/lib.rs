//! Holds the cross-set test (`tests/agreement.rs`) that the nine CMS rule sets give each
//! kind of request (`botgate_ruleset_sdk::testing::kinds`) the same category.
