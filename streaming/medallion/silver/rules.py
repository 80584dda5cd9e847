"""What a valid trade is: its fields, limits and the reason for each way a record falls short."""

TRADE_FIELDS = ("trade_id", "account_id", "symbol", "side", "quantity", "price", "channel", "event_time")
# Text fields that must hold more than blanks.
NAME_FIELDS = ("trade_id", "account_id", "symbol", "channel")
SIDES = ("BUY", "SELL")
MAX_VALUE_BYTES = 1024 * 1024
# Sanity bounds: anything beyond is a fat finger or a broken client, not a trade.
MAX_QUANTITY = 1_000_000_000
MAX_PRICE = 1_000_000_000.0
# ISO-8601 date, 'T' or space, time, then a zone: Z or +hh:mm / +hhmm / +hh. Java's regex and
# Python's (with re.ASCII) read it alike; the groups are the parts arrow.event_micros takes apart.
ISO_WITH_ZONE = (r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?\s*"
                 r"(Z|z|([+-])(\d{2})(?::?(\d{2}))?)$")

# The reasons, in the order the checks run: a record reports the first it fails.
EMPTY_VALUE = "empty value"
TOO_LARGE = "value is %d bytes, over the %d-byte limit"
NOT_UTF8 = "value is not valid UTF-8"
NOT_AN_OBJECT = "value is not a JSON object (malformed JSON, NaN/Infinity literals, an array or a scalar)"
MISSING_FIELD = "missing field '%s'"
NULL_FIELD = "field '%s' is null"
EMPTY_FIELD = "field '%s' is empty"
BAD_SIDE = "side must be BUY or SELL, got %s"
BAD_QUANTITY = "quantity must be a positive integer, got %s"
QUANTITY_OVER = "quantity %s is over the limit of %d"
BAD_PRICE = "price must be a finite positive number, got %s"
PRICE_OVER = "price %s is over the limit of %.0f"
TIME_WITHOUT_ZONE = "event_time must be ISO-8601 with a zone (e.g. 2026-03-02T09:32:00Z), got %s"
INVALID_TIME = "event_time is not a valid time: %s"
MISSING_KEY = "missing Kafka key (the account_id)"
