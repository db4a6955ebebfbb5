"""S3 objects streamed in both directions: one put or a multipart upload out, streamed GET in."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from runplane.adapters.envelope import Read

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# S3 parts must be at least 5 MiB (but the last); 8 MiB keeps memory bounded
# and 100 MB uploads to 13 requests.
PART_SIZE = 8 * 1024 * 1024


class ObjectMissing(Exception):
    pass


class ObjectChanged(Exception):
    """The object is not the version that was verified (its ETag differs)."""


@dataclass(frozen=True)
class StoredObject:
    key: str
    etag: str
    size: int


class ObjectStore:
    def __init__(self, client: S3Client, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def upload_stream(self, key: str, pieces: Iterable[bytes]) -> StoredObject:
        """Upload ``pieces`` as one object without holding more than a part in memory.

        An object that ends within its first part (nearly every one: logs, plans,
        states) is one ``PutObject`` once ``pieces`` is exhausted; a longer one is a
        multipart upload. Either way, any exception from ``pieces`` (or S3) leaves no
        object: a put is whole or absent, a multipart upload is aborted.
        """
        stream = iter(pieces)
        first = bytearray()
        for piece in stream:
            first += piece
            if len(first) >= PART_SIZE:
                return self._upload_parts(key, first, stream)
        done = self._s3.put_object(Bucket=self._bucket, Key=key, Body=bytes(first))
        return StoredObject(key, done["ETag"], len(first))

    def _upload_parts(self, key: str, buffer: bytearray, rest: Iterator[bytes]) -> StoredObject:
        upload_id = self._s3.create_multipart_upload(Bucket=self._bucket, Key=key)["UploadId"]
        parts: list[dict[str, Any]] = []
        size = len(buffer)
        try:
            while True:
                while len(buffer) >= PART_SIZE:
                    parts.append(
                        self._part(key, upload_id, len(parts) + 1, bytes(buffer[:PART_SIZE]))
                    )
                    del buffer[:PART_SIZE]
                piece = next(rest, None)
                if piece is None:
                    break
                buffer += piece
                size += len(piece)
            if buffer:
                parts.append(self._part(key, upload_id, len(parts) + 1, bytes(buffer)))
            done = self._s3.complete_multipart_upload(
                Bucket=self._bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
            )
        except BaseException:
            self._s3.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
            raise
        return StoredObject(key, done["ETag"], size)

    def _part(self, key: str, upload_id: str, number: int, body: bytes) -> dict[str, Any]:
        etag = self._s3.upload_part(
            Bucket=self._bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )["ETag"]
        return {"PartNumber": number, "ETag": etag}

    @contextmanager
    def open(self, key: str, etag: str | None = None) -> Iterator[Read]:
        """``read(n)`` over the object's streamed body; with ``etag``, another version fails."""
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
        if etag is not None:
            kwargs["IfMatch"] = etag
        try:
            body = self._s3.get_object(**kwargs)["Body"]
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in {"NoSuchKey", "404"}:
                raise ObjectMissing(key) from None
            if code in {"PreconditionFailed", "412"}:
                raise ObjectChanged(key) from None
            raise
        try:
            yield body.read
        finally:
            body.close()

    def head(self, key: str) -> StoredObject:
        try:
            found = self._s3.head_object(Bucket=self._bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code", "") in {"NoSuchKey", "404"}:
                raise ObjectMissing(key) from None
            raise
        return StoredObject(key, found["ETag"], found["ContentLength"])

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=key)

    def presign(self, method: str, key: str, seconds: int) -> str:
        operation = {"GET": "get_object", "PUT": "put_object"}[method]
        return self._s3.generate_presigned_url(
            operation, Params={"Bucket": self._bucket, "Key": key}, ExpiresIn=seconds
        )
