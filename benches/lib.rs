//! bench lib
