//! The crate's one error type.

/// Why an application-layer message could not be read. Variants that concern a message name the
/// byte offset (from the start of the message) and the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Community ID was asked for two addresses of different families.
    #[error("community id: source and destination addresses are of different families")]
    CommunityIdFamily,
}
