//! Rule set for joomla (being written).
