"""TP-Link's two local wire formats, as the device's side of them, written from their write-ups:

- the legacy "XOR" protocol (Kasa HS1xx/HS300/KP series, TCP 9999): each message is a 4-byte
  big-endian length and the JSON text enciphered with an autokey XOR whose first key is 171,
  each cipher byte being the next key (softScheck, "Reverse Engineering the TP-Link HS110",
  https://www.softscheck.com/en/blog/tp-link-reverse-engineering/);
- KLAP (Tapo, and Kasa firmware from 2023 on; HTTP): ``POST /app/handshake1`` with the client's
  16-byte seed answers the device's 16-byte seed and a hash proving the device knows the owner's
  TP-Link credentials; ``POST /app/handshake2`` proves the client knows them too; then
  ``POST /app/request?seq=N`` carries AES-128-CBC requests signed with SHA-256. Version 1
  (IOT.KLAP) hashes the credentials as md5(md5(user) + md5(password)), handshake1 as
  sha256(local_seed + auth) and handshake2 as sha256(remote_seed + auth); version 2 (SMART.KLAP,
  Tapo) as sha256(sha1(user) + sha1(password)), sha256(local_seed + remote_seed + auth) and
  sha256(remote_seed + local_seed + auth). Session key, IV and signature key are
  sha256("lsk"|"iv"|"ldk" + local_seed + remote_seed + auth), cut to 16, 12 (+ the 4-byte signed
  sequence, whose start is the IV hash's last 4 bytes) and 28 bytes; a message is
  sha256(sig_key + seq + ciphertext) followed by the ciphertext (PKCS#7 padded). Sources: Chris
  Wheeldon's write-up, https://gist.github.com/chriswheeldon/3b17d974db3817613c69191c0480fe55 (v1), and
  the description in python-kasa's KLAP transport (its module and KlapTransportV2 docstrings,
  https://github.com/python-kasa/python-kasa/blob/master/kasa/transports/klaptransport.py) for v2.
"""

from __future__ import annotations

import hashlib
import struct

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

XOR_FIRST_KEY = 171


def xor_encipher(text: bytes) -> bytes:
    key, out = XOR_FIRST_KEY, bytearray()
    for byte in text:
        key = key ^ byte
        out.append(key)
    return bytes(out)


def xor_decipher(data: bytes) -> bytes:
    key, out = XOR_FIRST_KEY, bytearray()
    for byte in data:
        out.append(key ^ byte)
        key = byte
    return bytes(out)


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()  # the protocol's choice, not ours


def _sha1(data: bytes) -> bytes:
    return hashlib.sha1(data, usedforsecurity=False).digest()  # the protocol's choice


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def owner_hash(version: int, user: str, password: str) -> bytes:
    """What a device keeps of its owner's TP-Link account."""
    if version == 1:
        return _md5(_md5(user.encode()) + _md5(password.encode()))
    return _sha256(_sha1(user.encode()) + _sha1(password.encode()))


def handshake1_proof(version: int, local_seed: bytes, remote_seed: bytes, auth: bytes) -> bytes:
    return _sha256(local_seed + auth) if version == 1 else _sha256(local_seed + remote_seed + auth)


def handshake2_proof(version: int, local_seed: bytes, remote_seed: bytes, auth: bytes) -> bytes:
    return _sha256(remote_seed + auth) if version == 1 else _sha256(remote_seed + local_seed + auth)


class KlapCipher:
    """The device's half of one KLAP session."""

    def __init__(self, local_seed: bytes, remote_seed: bytes, auth: bytes) -> None:
        seeds = local_seed + remote_seed + auth
        self._key = _sha256(b"lsk" + seeds)[:16]
        iv_hash = _sha256(b"iv" + seeds)
        self._iv12 = iv_hash[:12]
        self.first_seq = int.from_bytes(iv_hash[-4:], "big", signed=True)
        self._sig_key = _sha256(b"ldk" + seeds)[:28]

    def _cipher(self, seq: int) -> Cipher[modes.CBC]:
        return Cipher(algorithms.AES(self._key), modes.CBC(self._iv12 + struct.pack(">i", seq)))

    def open(self, message: bytes, seq: int) -> bytes | None:
        """The plaintext of a client's message, or None when its signature is wrong."""
        signature, body = message[:32], message[32:]
        if _sha256(self._sig_key + struct.pack(">i", seq) + body) != signature or not body:
            return None
        decryptor = self._cipher(seq).decryptor()
        padded = decryptor.update(body) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            return unpadder.update(padded) + unpadder.finalize()
        except ValueError:
            return None

    def seal(self, plaintext: bytes, seq: int) -> bytes:
        padder = padding.PKCS7(128).padder()
        encryptor = self._cipher(seq).encryptor()
        body = encryptor.update(padder.update(plaintext) + padder.finalize()) + encryptor.finalize()
        return _sha256(self._sig_key + struct.pack(">i", seq) + body) + body
