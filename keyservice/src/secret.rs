//! Secret containers of the server side. Each zeroizes on drop and redacts itself in
//! `Debug`; none implements `Display`, `Clone` or serde, so a secret cannot end up in a
//! log line, an error message or a response by accident.

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};
use zeroize::Zeroizing;

/// Failure of the OS CSPRNG (never expected on Linux; we fail closed if it happens).
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random number generator failed")]
pub struct RngError;

/// Fills `buf` from the OS CSPRNG (getrandom(2) via ring).
pub fn fill_random(rng: &SystemRandom, buf: &mut [u8]) -> Result<(), RngError> {
    rng.fill(buf).map_err(|_| RngError)
}

macro_rules! secret32 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name(Zeroizing<[u8; 32]>);

        impl $name {
            /// Takes ownership of the bytes; the caller's copy should be a `Zeroizing` too.
            pub fn from_bytes(bytes: Zeroizing<[u8; 32]>) -> Self {
                Self(bytes)
            }

            pub fn expose_secret(&self) -> &[u8; 32] {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }
    };
}

secret32!(
    /// The 32-byte root secret every key is derived from. Generated once from the OS
    /// CSPRNG; on disk only sealed.
    RootSecret
);

secret32!(
    /// The AES-256-GCM key that seals the root, bound to one compose hash by the platform.
    SealingKey
);

impl RootSecret {
    /// A fresh root from the OS CSPRNG.
    pub fn generate(rng: &SystemRandom) -> Result<Self, RngError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        fill_random(rng, bytes.as_mut())?;
        Ok(Self(bytes))
    }
}
