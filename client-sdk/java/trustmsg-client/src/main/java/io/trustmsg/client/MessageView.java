package io.trustmsg.client;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;

/**
 * A message as trustmsg shows it (the answer to prepare, commit, rollback and get). Fields the
 * service adds later are ignored.
 *
 * @param id trustmsg's id for the message, also the {@code trustmsg-message-id} record header
 * @param status {@code PREPARED}, {@code COMMITTED}, {@code ROLLED_BACK} or {@code VERIFY_FAILED}
 * @param sendStatus {@code PENDING}, {@code SENT} or {@code SEND_FAILED}; null before commit
 */
@JsonIgnoreProperties(ignoreUnknown = true)
public record MessageView(
    @JsonProperty(value = "id", required = true) long id,
    @JsonProperty(value = "biz_id", required = true) String bizId,
    @JsonProperty(value = "message_key", required = true) String messageKey,
    @JsonProperty("topic") String topic,
    @JsonProperty("key") String key,
    @JsonProperty(value = "status", required = true) String status,
    @JsonProperty("send_status") String sendStatus,
    @JsonProperty(value = "verify_attempts", required = true) int verifyAttempts,
    @JsonProperty(value = "send_attempts", required = true) int sendAttempts,
    @JsonProperty(value = "payload_size", required = true) long payloadSize,
    @JsonProperty("kafka_partition") Integer kafkaPartition,
    @JsonProperty("kafka_offset") Long kafkaOffset,
    @JsonProperty("last_error") String lastError,
    @JsonProperty(value = "created_at", required = true) String createdAt,
    @JsonProperty(value = "updated_at", required = true) String updatedAt,
    @JsonProperty("decided_at") String decidedAt,
    @JsonProperty("deliver_at") String deliverAt,
    @JsonProperty("sent_at") String sentAt) {

  public boolean isCommitted() {
    return "COMMITTED".equals(status);
  }

  public boolean isRolledBack() {
    return "ROLLED_BACK".equals(status);
  }

  public boolean isSent() {
    return "SENT".equals(sendStatus);
  }
}
