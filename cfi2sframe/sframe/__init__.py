"""The SFrame backend: lowering, section encoding and decoding."""
