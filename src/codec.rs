//! The protobuf codec of tau's gRPC API ([`TauCodec`]): prost's encoding and decoding, except that
//! a message that cannot be decoded is refused as INVALID_ARGUMENT, naming what failed. prost's own
//! codec answers INTERNAL, which tells a client the hub is broken when it was the client's request
//! that was malformed.
//!
//! Invariant: every `tau.v1` service and client the build generates uses this codec
//! (`build.rs`), so the hub answers one code for one cause on every method.

use std::marker::PhantomData;

use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// prost's codec with decode failures as INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct TauCodec<T, U> {
    _messages: PhantomData<(T, U)>,
}

impl<T, U> Default for TauCodec<T, U> {
    fn default() -> Self {
        Self {
            _messages: PhantomData,
        }
    }
}

impl<T, U> Codec for TauCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = TauDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        TauDecoder(ProstCodec::<T, U>::raw_decoder(BufferSettings::default()))
    }
}

/// prost's decoder, its failures refused as INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct TauDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for TauDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| {
            Status::invalid_argument(format!(
                "the message could not be decoded as {}: {}",
                std::any::type_name::<U>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("protobuf"),
                status.message()
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
