// fauxqs, the SQS emulator, listening on 127.0.0.1 only (its own starter
// listens on every interface), in memory. Run by sqstest.Start:
//
//	node fauxqs.mjs <fauxqs's dist directory> <port>
const [dist, port] = process.argv.slice(2);
const { buildApp } = await import(`${dist}/app.js`);
const { SqsStore } = await import(`${dist}/sqs/sqsStore.js`);
const { SnsStore } = await import(`${dist}/sns/snsStore.js`);
const { S3Store } = await import(`${dist}/s3/s3Store.js`);
const app = buildApp({
	logger: false,
	stores: { sqsStore: new SqsStore(), snsStore: new SnsStore(), s3Store: new S3Store() },
});
console.log(await app.listen({ port: Number(port), host: "127.0.0.1" }));
