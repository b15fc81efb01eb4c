"""A request's parameters as UDPipe reads them: the URL's query, then (POST) the body's form
fields, ``application/x-www-form-urlencoded`` or ``multipart/form-data`` (a file upload is a
field like any other: ``curl -F data=@file``). Everything must be UTF-8; the body is read up to
``max_body`` bytes and refused past it (413) without reading the rest."""

from __future__ import annotations

from urllib.parse import parse_qsl

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from parser.serve.protocol import ProtocolError

__all__ = ["ClientDisconnect", "parameters"]

TOO_LARGE = "The payload size is too large."


async def parameters(request: Request, *, max_body: int) -> dict[str, str]:
    """The parameters of ``request`` (query first, body fields replacing them)."""
    try:
        query = request.url.query
        params = dict(parse_qsl(query, keep_blank_values=True, encoding="utf-8", errors="strict"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("Cannot parse request URL.") from None
    if request.method != "POST":
        return params
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
        raise ProtocolError(f"{TOO_LARGE}\nThe limit is {max_body} bytes.", status=413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_body:
            raise ProtocolError(f"{TOO_LARGE}\nThe limit is {max_body} bytes.", status=413)
    kind = request.headers.get("content-type", "")
    if not body and not kind:
        return params
    if kind.startswith("multipart/form-data"):
        params.update(_multipart(bytes(body), kind))
    elif kind.startswith("application/x-www-form-urlencoded"):
        try:
            text = bytes(body).decode("utf-8")
            params.update(parse_qsl(text, keep_blank_values=True, encoding="utf-8",
                                    errors="strict"))
        except UnicodeDecodeError as error:
            raise ProtocolError("Cannot parse the application/x-www-form-urlencoded payload.\n"
                                f"{_not_utf8(error)}") from None
    else:
        raise ProtocolError(f"Unsupported payload Content-Type '{kind or '<none>'}'.\n"
                            "Send application/x-www-form-urlencoded or multipart/form-data.")
    return params


def _multipart(body: bytes, kind: str) -> dict[str, str]:
    """The fields of a ``multipart/form-data`` body, each decoded as UTF-8."""
    what = "Cannot parse the multipart/form-data payload."
    _, options = parse_options_header(kind)
    boundary = options.get(b"boundary")
    if not boundary:
        raise ProtocolError(f"{what}\nIts Content-Type has no boundary.")
    parts: list[tuple[dict[bytes, bytes], bytearray]] = []
    header: list[bytes] = [b"", b""]

    def begin() -> None:
        parts.append(({}, bytearray()))

    def header_field(data: bytes, start: int, end: int) -> None:
        header[0] += data[start:end]

    def header_value(data: bytes, start: int, end: int) -> None:
        header[1] += data[start:end]

    def header_end() -> None:
        parts[-1][0][header[0].lower()] = header[1]
        header[0] = header[1] = b""

    def data(chunk: bytes, start: int, end: int) -> None:
        parts[-1][1].extend(chunk[start:end])

    parser = MultipartParser(boundary, callbacks={
        "on_part_begin": begin, "on_header_field": header_field,
        "on_header_value": header_value, "on_header_end": header_end, "on_part_data": data})
    try:
        parser.write(body)
        parser.finalize()
    except (MultipartParseError, ValueError) as error:
        raise ProtocolError(f"{what}\n{error}") from None
    fields: dict[str, str] = {}
    for headers, value in parts:
        _, disposition = parse_options_header(headers.get(b"content-disposition", b""))
        name = disposition.get(b"name")
        if not name:
            continue
        try:
            fields[name.decode("utf-8")] = bytes(value).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProtocolError(f"{what}\nThe field '{name.decode('utf-8', 'replace')}': "
                                f"{_not_utf8(error)}") from None
    return fields


def _not_utf8(error: UnicodeDecodeError) -> str:
    return (f"The payload is not in UTF-8 encoding: byte 0x{error.object[error.start]:02x} at "
            f"offset {error.start}.")
