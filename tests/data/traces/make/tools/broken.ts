interface ToolCall { name: string; arguments: Record<string, unknown> }

function dispatch(call: ToolCall): Promise<string> {
  return call.name.toUpperCase();
}

const call: ToolCall = { name: "search", args: {} };
dispatch(call).then((r) => console.log(r.lenght));
