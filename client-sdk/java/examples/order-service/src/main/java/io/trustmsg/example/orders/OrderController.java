package io.trustmsg.example.orders;

import io.trustmsg.client.AlreadyCommittedException;
import io.trustmsg.client.AlreadyRolledBackException;
import io.trustmsg.client.Message;
import io.trustmsg.client.TrustmsgClient;
import io.trustmsg.spring.TrustmsgPublisher;
import io.trustmsg.spring.TrustmsgTemplate;
import java.util.List;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** POST /orders places an order and publishes it to the topic {@code orders}; GET shows one. */
@RestController
public class OrderController {
  /**
   * A new order; {@code fail} makes its local transaction fail, {@code loseCommit} drops the commit
   * call.
   */
  public record NewOrder(
      String order_id, String customer, long amount_cents, boolean fail, boolean lose_commit) {}

  /** What the topic {@code orders} carries. */
  public record OrderPlaced(String order_id, String customer, long amount_cents) {}

  private final TrustmsgTemplate trustmsg;
  private final TrustmsgPublisher publisher;
  private final TrustmsgClient client;
  private final JdbcTemplate jdbc;

  public OrderController(
      TrustmsgTemplate trustmsg,
      TrustmsgPublisher publisher,
      TrustmsgClient client,
      JdbcTemplate jdbc) {
    this.trustmsg = trustmsg;
    this.publisher = publisher;
    this.client = client;
    this.jdbc = jdbc;
  }

  @PostMapping("/orders")
  public ResponseEntity<Map<String, Object>> place(@RequestBody NewOrder order) {
    if (order.order_id() == null
        || order.order_id().isBlank()
        || order.customer() == null
        || order.amount_cents() <= 0) {
      return ResponseEntity.badRequest()
          .body(Map.of("error", "order_id, customer and a positive amount_cents are required"));
    }
    // The record's value: the event as JSON, from the application's ObjectMapper bean.
    Message message =
        publisher
            .json(
                Message.builder(order.order_id(), "orders").key(order.customer()),
                new OrderPlaced(order.order_id(), order.customer(), order.amount_cents()))
            .build();
    // lose_commit: as if the process stopped between its local commit and the commit call (the
    // template's test hook stops the call there); check-back settles the message from the barrier.
    TrustmsgTemplate helper =
        order.lose_commit()
            ? trustmsg.afterLocalCommit(
                m -> {
                  throw new CommitLost();
                })
            : trustmsg;
    try {
      helper.execute(
          message,
          status -> {
            insert(order);
            if (order.fail()) {
              throw new OrderRefused("payment declined for " + order.order_id());
            }
            return null;
          });
    } catch (CommitLost e) {
      return ResponseEntity.status(HttpStatus.ACCEPTED)
          .body(Map.of("order_id", order.order_id(), "commit", "lost"));
    } catch (AlreadyCommittedException e) {
      // A retry of an order that went through: nothing written now.
      return ResponseEntity.ok(Map.of("order_id", order.order_id(), "status", "already placed"));
    } catch (AlreadyRolledBackException e) {
      // Its message was rolled back before: this order id can never be placed.
      return ResponseEntity.status(HttpStatus.CONFLICT)
          .body(Map.of("order_id", order.order_id(), "status", "refused"));
    }
    return ResponseEntity.status(HttpStatus.CREATED).body(Map.of("order_id", order.order_id()));
  }

  private void insert(NewOrder order) {
    jdbc.update(
        "INSERT INTO placed_orders (order_id, customer, amount_cents) VALUES (?, ?, ?)",
        order.order_id(),
        order.customer(),
        order.amount_cents());
  }

  @GetMapping("/orders/{id}")
  public ResponseEntity<Map<String, Object>> get(@PathVariable String id) {
    List<Map<String, Object>> rows =
        jdbc.queryForList(
            "SELECT order_id, customer, amount_cents FROM placed_orders WHERE order_id = ?", id);
    if (rows.isEmpty()) {
      return ResponseEntity.notFound().build();
    }
    Map<String, Object> out = new java.util.LinkedHashMap<>(rows.get(0));
    out.put("message", client.get(id).status());
    return ResponseEntity.ok(out);
  }

  /** Thrown by the test hook of lose_commit: no decision is sent. */
  static class CommitLost extends RuntimeException {
    private static final long serialVersionUID = 1L;
  }

  /** The local transaction's own failure: rolled back, the message too. */
  static class OrderRefused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    OrderRefused(String why) {
      super(why);
    }
  }

  @ExceptionHandler(OrderRefused.class)
  ResponseEntity<Map<String, Object>> refused(OrderRefused e) {
    return ResponseEntity.status(HttpStatus.UNPROCESSABLE_ENTITY)
        .body(Map.of("error", e.getMessage()));
  }
}
