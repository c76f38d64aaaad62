package io.trustmsg.spring;

import io.trustmsg.client.CheckBackHandler;
import java.util.Objects;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * The check-back endpoint for a Spring MVC application, at {@code trustmsg.check.path} ({@code
 * /trustmsg/check}): the signature verified over the raw body, the answer from the barrier or from
 * the application's {@link io.trustmsg.client.CheckBackDecider} bean.
 */
@RestController
public class TrustmsgCheckBackController {
  private final CheckBackHandler handler;

  public TrustmsgCheckBackController(CheckBackHandler handler) {
    this.handler = Objects.requireNonNull(handler, "handler");
  }

  @PostMapping(
      path = "${trustmsg.check.path:/trustmsg/check}",
      produces = MediaType.APPLICATION_JSON_VALUE)
  public ResponseEntity<byte[]> check(
      @RequestHeader HttpHeaders headers, @RequestBody(required = false) byte[] body) {
    CheckBackHandler.Response r =
        handler.handle(headers::getFirst, body == null ? new byte[0] : body);
    return ResponseEntity.status(r.status()).contentType(MediaType.APPLICATION_JSON).body(r.body());
  }
}
