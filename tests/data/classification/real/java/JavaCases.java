// Real Java failures for holdout-real.jsonl: each case runs a library against something on this machine (a
// loopback HTTP server started here that answers as the OpenAI API does, a closed port, a silent TCP
// listener, files) and prints the outcome a Java agent reports over gRPC (there is no Java client): the
// exception's class name and its getMessage(), one JSON line per case, labelled beforehand by DESIGN.md's
// category table.
//
// Run (Java 17; the libraries' versions are in pom.xml):
//   mvn -q -f pom.xml dependency:copy-dependencies -DoutputDirectory=/tmp/jdeps
//   java -cp '/tmp/jdeps/*' JavaCases.java > java.jsonl
// Random ports are written as 8787 (the server) and 8799 (a closed port).

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import dev.langchain4j.model.openai.OpenAiChatModel;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.springframework.ai.openai.OpenAiChatOptions;
import org.springframework.web.client.RestClient;

public class JavaCases {
    static final ObjectMapper JSON = new ObjectMapper();
    static int port;
    static int closed;

    interface Run {
        void run() throws Exception;
    }

    /** The OpenAI API's error body. */
    static String openai(String message, String type, String code) {
        return "{\"error\":{\"message\":\"" + message + "\",\"type\":\"" + type + "\",\"param\":null,\"code\":"
                + (code == null ? "null" : "\"" + code + "\"") + "}}";
    }

    /** What each route answers: its status and body (a route named "sleep" answers after 5 s). */
    static final Map<String, Object[]> ROUTES = Map.of(
            "rate", new Object[] {429, openai("Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.", "requests", "rate_limit_exceeded")},
            "quota", new Object[] {429, openai("You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota")},
            "key", new Object[] {401, openai("Incorrect API key provided: sk-proj-****************************abcd. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")},
            "context", new Object[] {400, openai("This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.", "invalid_request_error", "context_length_exceeded")},
            "model", new Object[] {404, openai("The model `gpt-9-turbo` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")},
            "500", new Object[] {500, openai("The server had an error while processing your request. Sorry about that!", "server_error", null)},
            "503", new Object[] {503, openai("The engine is currently overloaded, please try again later.", "server_error", null)});

    static void emit(String id, String category, String source, Throwable error) throws Exception {
        boolean retryable = List.of("timeout", "rate_limited", "network", "unavailable", "internal").contains(category);
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("exception_type", error.getClass().getName());
        String message = error.getMessage() == null ? "" : error.getMessage();
        outcome.put("message", message.replace(":" + port, ":8787").replace(":" + closed, ":8799")
                .replace("/" + port, "/8787").replace("/" + closed, "/8799"));
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("id", id);
        line.put("source", source);
        line.put("category", category);
        line.put("retryable", retryable);
        line.put("tags", new ArrayList<String>());
        line.put("outcome", outcome);
        System.out.println(JSON.writeValueAsString(line));
    }

    static void runCase(String id, String category, String source, Run run) throws Exception {
        try {
            run.run();
            System.err.println(id + ": did not fail");
        } catch (Exception error) {
            emit(id, category, source, error);
        }
    }

    static OpenAiChatModel model(String route, Duration timeout) {
        return OpenAiChatModel.builder()
                .baseUrl("http://127.0.0.1:" + port + "/" + route + "/v1")
                .apiKey("sk-test")
                .modelName("gpt-4o")
                .timeout(timeout)
                .maxRetries(0)
                .build();
    }

    static org.springframework.ai.openai.OpenAiChatModel springAi(String base, Duration timeout) {
        return org.springframework.ai.openai.OpenAiChatModel.builder()
                .options(OpenAiChatOptions.builder().baseUrl(base).apiKey("sk-test").model("gpt-4o")
                        .maxRetries(0).timeout(timeout).build())
                .build();
    }

    public static void main(String[] args) throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            String route = exchange.getRequestURI().getPath().split("/")[1];
            if (route.equals("sleep")) {
                try {
                    Thread.sleep(5000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            Object[] answer = ROUTES.getOrDefault(route, new Object[] {200, "{}"});
            byte[] body = ((String) answer[1]).getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().add("Content-Type", "application/json");
            exchange.sendResponseHeaders((Integer) answer[0], body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        server.setExecutor(java.util.concurrent.Executors.newCachedThreadPool());
        server.start();
        port = server.getAddress().getPort();
        try (ServerSocket s = new ServerSocket(0)) {
            closed = s.getLocalPort();
        }

        String lc4j = "LangChain4j 1.19.0 (langchain4j-open-ai, OpenAiChatModel)";
        runCase("r-java-lc4j-rate", "rate_limited", lc4j, () -> model("rate", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-quota", "quota_exceeded", lc4j, () -> model("quota", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-key", "auth", lc4j, () -> model("key", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-context", "context_length", lc4j, () -> model("context", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-model", "not_found", lc4j, () -> model("model", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-500", "internal", lc4j, () -> model("500", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-503", "unavailable", lc4j, () -> model("503", Duration.ofSeconds(5)).chat("hi"));
        runCase("r-java-lc4j-timeout", "timeout", lc4j, () -> model("sleep", Duration.ofMillis(500)).chat("hi"));
        runCase("r-java-lc4j-refused", "network", lc4j, () -> OpenAiChatModel.builder()
                .baseUrl("http://127.0.0.1:" + closed + "/v1").apiKey("sk-test").modelName("gpt-4o").maxRetries(0)
                .build().chat("hi"));

        String springAi = "Spring AI 2.0.1 (spring-ai-openai, OpenAiChatModel, on openai-java 4.49.0)";
        for (String[] c : new String[][] {
                {"rate", "r-java-spring-ai-rate", "rate_limited"}, {"quota", "r-java-spring-ai-quota", "quota_exceeded"},
                {"key", "r-java-spring-ai-key", "auth"}, {"context", "r-java-spring-ai-context", "context_length"},
                {"model", "r-java-spring-ai-model", "not_found"}, {"500", "r-java-spring-ai-500", "internal"},
                {"503", "r-java-spring-ai-503", "unavailable"}}) {
            runCase(c[1], c[2], springAi, () -> springAi("http://127.0.0.1:" + port + "/" + c[0] + "/v1",
                    Duration.ofSeconds(5)).call("hi"));
        }
        // Past its timeout openai-java raises the same OpenAIIoException("Request failed") as for a refused
        // connection (the cause tells them apart, which getMessage() does not show): one case, network.
        runCase("r-java-spring-ai-refused", "network", springAi,
                () -> springAi("http://127.0.0.1:" + closed + "/v1", Duration.ofSeconds(5)).call("hi"));

        String spring = "Spring Framework 7.0.10 (spring-web, RestClient)";
        RestClient rest = RestClient.create();
        for (String[] c : new String[][] {
                {"rate", "r-java-spring-429", "rate_limited"}, {"key", "r-java-spring-401", "auth"},
                {"model", "r-java-spring-404", "not_found"}, {"503", "r-java-spring-503", "unavailable"}}) {
            runCase(c[1], c[2], spring, () -> rest.get().uri("http://127.0.0.1:" + port + "/" + c[0] + "/x")
                    .retrieve().body(String.class));
        }
        runCase("r-java-spring-refused", "network", spring, () -> rest.get()
                .uri("http://127.0.0.1:" + closed + "/x").retrieve().body(String.class));

        String jdk = "OpenJDK 17 (java.net.http.HttpClient)";
        HttpClient http = HttpClient.newHttpClient();
        runCase("r-java-http-timeout", "timeout", jdk, () -> http.send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/sleep")).timeout(Duration.ofMillis(500)).build(),
                HttpResponse.BodyHandlers.ofString()));
        Path dir = Files.createTempDirectory("rebound-java");
        runCase("r-java-file-exists", "conflict", "OpenJDK 17 (java.nio.file.Files.createDirectory)",
                () -> Files.createDirectory(dir));
        runCase("r-java-file-missing", "not_found", "OpenJDK 17 (java.nio.file.Files.readString)",
                () -> Files.readString(dir.resolve("input.csv")));

        runCase("r-java-pgjdbc-refused", "network", "PgJDBC 42.7.14 (org.postgresql)",
                () -> DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + closed + "/app", "app", "x"));

        String grpc = "grpc-java 1.85.1 (grpc-netty-shaded, a blocking unary call)";
        MethodDescriptor.Marshaller<byte[]> bytes = new MethodDescriptor.Marshaller<>() {
            public InputStream stream(byte[] value) {
                return new ByteArrayInputStream(value);
            }

            public byte[] parse(InputStream stream) {
                try {
                    return stream.readAllBytes();
                } catch (java.io.IOException e) {
                    throw new RuntimeException(e);
                }
            }
        };
        MethodDescriptor<byte[], byte[]> search = MethodDescriptor.<byte[], byte[]>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("search.v1.Search/Query")
                .setRequestMarshaller(bytes).setResponseMarshaller(bytes).build();
        ManagedChannel refused = NettyChannelBuilder.forAddress("127.0.0.1", closed).usePlaintext().build();
        runCase("r-java-grpc-refused", "unavailable", grpc,
                () -> ClientCalls.blockingUnaryCall(refused, search, CallOptions.DEFAULT, new byte[0]));
        refused.shutdownNow();
        try (ServerSocket silent = new ServerSocket(0)) {
            Thread accepter = new Thread(() -> {
                try {
                    silent.accept();
                    Thread.sleep(10000);
                } catch (Exception ignored) {
                    // closed at the end
                }
            });
            accepter.setDaemon(true);
            accepter.start();
            ManagedChannel quiet = NettyChannelBuilder.forAddress("127.0.0.1", silent.getLocalPort()).usePlaintext().build();
            runCase("r-java-grpc-deadline", "timeout", grpc, () -> ClientCalls.blockingUnaryCall(quiet, search,
                    CallOptions.DEFAULT.withDeadlineAfter(500, TimeUnit.MILLISECONDS), new byte[0]));
            quiet.shutdownNow();
        }
        server.stop(0);
        System.exit(0);
    }
}
