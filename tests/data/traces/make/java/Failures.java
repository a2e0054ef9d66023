// Java failures for the trace set: each scenario really throws; the JVM's report of
// the uncaught exception becomes one file. Run by regenerate.sh: java Failures.java NAME.
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

public class Failures {
    record Order(String id, Map<String, String> meta) {}

    static String region(Order o) {
        return o.meta().get("region").toUpperCase();
    }

    static void npe() {
        System.out.println(region(new Order("o-1", Map.of())));
    }

    static int parsePort(String s) {
        return Integer.parseInt(s);
    }

    static void numberFormat() {
        System.out.println(parsePort("80a"));
    }

    static String fetch(String url) throws IOException, InterruptedException {
        HttpClient client = HttpClient.newHttpClient();
        return client.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    static void connectRefused() throws Exception {
        fetch("http://127.0.0.1:1/api/search?q=rust");
    }

    static String readSettings(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            throw new UncheckedIOException("could not read settings", e);
        }
    }

    static void causedBy() {
        try {
            readSettings(Path.of("/etc/agent/settings.json"));
        } catch (RuntimeException e) {
            throw new IllegalStateException("agent failed to start", e);
        }
    }

    static void streamIndex() {
        List<List<Integer>> rows = List.of(List.of(1, 2), List.of(3));
        rows.stream().map(r -> r.get(1)).forEach(System.out::println);
    }

    // Needs jackson-databind on the class path (regenerate.sh fetches it from Maven Central).
    static void jackson() throws Exception {
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        record ToolCall(String name, Map<String, Object> arguments) {}
        mapper.readValue("{\"name\": \"search\", \"arguments\": \"q=rust\"}", ToolCall.class);
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "npe" -> npe();
            case "number_format" -> numberFormat();
            case "connect_refused" -> connectRefused();
            case "caused_by" -> causedBy();
            case "stream_index" -> streamIndex();
            case "jackson" -> jackson();
            default -> throw new IllegalArgumentException(args[0]);
        }
    }
}
