//! rule engine tests
