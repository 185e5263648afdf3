// Drives the endpoint with the AWS SDK for JavaScript v3 (lower-case header names, the JSON
// protocol, SigV4 with x-amz-content-sha256 and x-amz-user-agent signed): create, send,
// receive, delete. Prints one JSON line for tests/integration/test_endpoint_security.py.
// Usage: node sqs_roundtrip.mjs <endpoint-url> <queue-name>  (keys from AWS_ACCESS_KEY_ID/...)
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";

const [endpoint, name] = process.argv.slice(2);
const sqs = new SQSClient({ endpoint, region: "us-east-1", maxAttempts: 2 });
const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
const sent = await sqs.send(
  new SendMessageCommand({
    QueueUrl,
    MessageBody: "from javascript",
    MessageAttributes: { lang: { DataType: "String", StringValue: "js" } },
  }),
);
const got = await sqs.send(
  new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 5, MessageAttributeNames: ["All"] }),
);
const messages = got.Messages ?? [];
for (const message of messages) {
  await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: message.ReceiptHandle }));
}
const counts = await sqs.send(
  new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["All"] }),
);
console.log(
  JSON.stringify({
    queueUrl: QueueUrl,
    sentId: sent.MessageId,
    received: messages.map((m) => ({
      id: m.MessageId,
      body: m.Body,
      lang: m.MessageAttributes?.lang?.StringValue,
    })),
    left: counts.Attributes.ApproximateNumberOfMessages,
    inFlight: counts.Attributes.ApproximateNumberOfMessagesNotVisible,
  }),
);
