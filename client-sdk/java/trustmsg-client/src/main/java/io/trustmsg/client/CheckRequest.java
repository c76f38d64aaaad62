package io.trustmsg.client;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;

/**
 * The body of a check-back call: trustmsg asks what the producer's local transaction for this
 * message did. Fields added later are ignored.
 *
 * @param messageId trustmsg's id for the message; the answer echoes it
 * @param attempt 1 for the first check-back of the message, then 2, 3, …
 * @param preparedAt when prepare stored the message (RFC 3339, UTC)
 */
@JsonIgnoreProperties(ignoreUnknown = true)
public record CheckRequest(
    @JsonProperty(value = "biz_id", required = true) String bizId,
    @JsonProperty(value = "message_key", required = true) String messageKey,
    @JsonProperty(value = "message_id", required = true) long messageId,
    @JsonProperty(value = "attempt", required = true) int attempt,
    @JsonProperty(value = "prepared_at", required = true) String preparedAt) {}
