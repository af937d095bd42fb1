//! [`Fact`]: an observed fact that costs a request, read only when a decision asks for it.

/// A fact the actor reads only when a decision needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Fact<T> {
    /// Not read in this pass: a decision that needs it asks for it ([`super::Action::Read`]).
    #[default]
    NotRead,
    Read(T),
}

impl<T> Fact<T> {
    /// The fact, once read.
    pub fn read(&self) -> Option<&T> {
        match self {
            Fact::NotRead => None,
            Fact::Read(fact) => Some(fact),
        }
    }
}
