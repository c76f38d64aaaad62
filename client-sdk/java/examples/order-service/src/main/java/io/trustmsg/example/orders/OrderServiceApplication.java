package io.trustmsg.example.orders;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * An order service that publishes "order placed" through trustmsg: each order and its barrier
 * marker commit in one transaction of Spring's transaction manager ({@code TrustmsgTemplate}), and
 * the starter serves the check-back endpoint at /trustmsg/check, answering from the barrier.
 */
@SpringBootApplication
public class OrderServiceApplication {
  public static void main(String[] args) {
    SpringApplication.run(OrderServiceApplication.class, args);
  }
}
