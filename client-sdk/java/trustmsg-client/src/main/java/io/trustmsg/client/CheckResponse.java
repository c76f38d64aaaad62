package io.trustmsg.client;

import com.fasterxml.jackson.annotation.JsonProperty;

/** The answer to a check-back call, sent as {@code {"message_id":…,"decision":…}} with 200. */
public record CheckResponse(
    @JsonProperty("message_id") long messageId, @JsonProperty("decision") Decision decision) {}
