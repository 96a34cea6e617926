//! Rule set for classifier (being written).
