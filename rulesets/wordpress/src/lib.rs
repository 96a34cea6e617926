//! Rule set for wordpress (being written).
