//! botgate gateway library.
