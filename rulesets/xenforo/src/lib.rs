//! Rule set for xenforo (being written).
