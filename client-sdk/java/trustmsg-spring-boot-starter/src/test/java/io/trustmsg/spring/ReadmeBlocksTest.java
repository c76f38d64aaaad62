package io.trustmsg.spring;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every {@code ```java} block of client-sdk/java/README.md compiles, against the SDK as built (this
 * module's test classpath: the client, the Kafka way in, the starter, Spring, the JDBC drivers), so
 * the README cannot drift from the API.
 *
 * <p>Each block becomes one source file in a package of its own ({@code readme.blockN}), importing
 * {@code io.trustmsg.client.*}, {@code io.trustmsg.kafka.*} and {@code io.trustmsg.spring.*}; its
 * own leading {@code import} lines go on top. A block that declares a class, record or interface is
 * compiled as it is; any other block is a method body ({@code throws Exception}).
 */
class ReadmeBlocksTest {
  private static final Pattern BLOCK = Pattern.compile("(?ms)^```java\\n(.*?)^```");
  private static final Pattern TYPE =
      Pattern.compile("(?m)^(?:@\\S+.*\\n)*(?:public |final |abstract )*(class|record|interface) ");

  static Path readme() {
    Path here = Path.of("").toAbsolutePath();
    for (Path p = here; p != null; p = p.getParent()) {
      Path r = p.resolve("client-sdk/java/README.md");
      if (Files.exists(r)) {
        return r;
      }
      if (p.getFileName() != null
          && p.getFileName().toString().equals("java")
          && Files.exists(p.resolve("README.md"))) {
        return p.resolve("README.md");
      }
    }
    throw new IllegalStateException("client-sdk/java/README.md not found above " + here);
  }

  static List<String> blocks(String markdown, List<Integer> lines) {
    List<String> out = new ArrayList<>();
    Matcher m = BLOCK.matcher(markdown);
    while (m.find()) {
      out.add(m.group(1));
      lines.add(markdown.substring(0, m.start(1)).split("\n", -1).length);
    }
    return out;
  }

  static String source(int n, String block) {
    StringBuilder imports = new StringBuilder();
    List<String> rest = new ArrayList<>();
    boolean head = true;
    for (String line : block.split("\n", -1)) {
      if (head && (line.startsWith("import ") || line.isBlank())) {
        imports.append(line).append('\n');
      } else {
        head = false;
        rest.add(line);
      }
    }
    String body = String.join("\n", rest);
    StringBuilder src = new StringBuilder();
    src.append("package readme.block").append(n).append(";\n");
    src.append("import io.trustmsg.client.*;\nimport io.trustmsg.kafka.*;\n");
    src.append("import io.trustmsg.spring.*;\n");
    src.append(imports);
    if (TYPE.matcher(body).find()) {
      src.append(body).append('\n');
    } else {
      src.append("class Block").append(n).append(" {\n");
      src.append("  static void run() throws Exception {\n").append(body).append("\n  }\n}\n");
    }
    return src.toString();
  }

  /** "5 (README.md line 231 on)" for the source of block 5. */
  static String where(JavaFileObject source, List<Integer> lines) {
    if (source == null) {
      return "?";
    }
    Matcher m = Pattern.compile("Block(\\d+)\\.java").matcher(source.getName());
    if (!m.find()) {
      return source.getName();
    }
    int n = Integer.parseInt(m.group(1));
    return n + " (README.md line " + lines.get(n - 1) + " on, " + source.getName() + ")";
  }

  @Test
  void everyJavaBlockOfTheReadmeCompiles(@TempDir Path dir) throws IOException {
    String markdown = Files.readString(readme(), StandardCharsets.UTF_8);
    List<Integer> lines = new ArrayList<>();
    List<String> blocks = blocks(markdown, lines);
    assertFalse(blocks.isEmpty(), "no ```java block in the README");
    List<Path> files = new ArrayList<>();
    for (int i = 0; i < blocks.size(); i++) {
      Path pkg = dir.resolve("src/readme/block" + (i + 1));
      Files.createDirectories(pkg);
      Path f = pkg.resolve("Block" + (i + 1) + ".java");
      Files.writeString(f, source(i + 1, blocks.get(i)));
      files.add(f);
    }
    String classpath = System.getProperty("surefire.test.class.path");
    if (classpath == null || classpath.isEmpty()) {
      classpath = System.getProperty("java.class.path");
    }
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    StringWriter out = new StringWriter();
    Path classes = Files.createDirectories(dir.resolve("classes"));
    try (StandardJavaFileManager fm = javac.getStandardFileManager(diagnostics, null, null)) {
      boolean ok =
          javac
              .getTask(
                  out,
                  fm,
                  diagnostics,
                  List.of(
                      "-proc:none",
                      "-classpath",
                      classpath,
                      "-d",
                      classes.toString(),
                      "--release",
                      "17"),
                  null,
                  fm.getJavaFileObjectsFromPaths(files))
              .call();
      StringBuilder why = new StringBuilder();
      diagnostics
          .getDiagnostics()
          .forEach(
              d ->
                  why.append(d.getKind())
                      .append(" in README block ")
                      .append(where(d.getSource(), lines))
                      .append(" line ")
                      .append(d.getLineNumber())
                      .append(": ")
                      .append(d.getMessage(null))
                      .append('\n'));
      assertTrue(ok, blocks.size() + " README blocks, compiled:\n" + why + out);
    }
  }
}
